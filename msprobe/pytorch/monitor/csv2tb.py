"""`from msprobe.pytorch.monitor.csv2tb import csv2tensorboard_by_step` (1.2.1's path; the code is framework-neutral)."""
from msprobe.core.monitor.csv2tb import csv2tensorboard_by_step

__all__ = ["csv2tensorboard_by_step"]
