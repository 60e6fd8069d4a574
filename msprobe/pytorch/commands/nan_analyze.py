"""`msprobe -f pytorch nan_analyze`: the rank, step and call where a job's first inf/nan was produced
(msprobe.core.overflow.nan_command)."""
from msprobe.core.overflow.nan_command import DESCRIPTION, add_arguments, run

__all__ = ["DESCRIPTION", "add_arguments", "run"]
