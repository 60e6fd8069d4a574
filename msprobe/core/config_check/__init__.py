"""config_check: pack what a training run was set up with, and name what differs between two runs."""
from msprobe.core.config_check.pack import ConfigChecker

__all__ = ["ConfigChecker"]
