"""`msprobe -f mindspore trend`: a job's statistics in one DuckDB file, with drift heatmaps (msprobe.core.trend.command)."""
from msprobe.core.trend.command import DESCRIPTION, add_arguments, run

__all__ = ["DESCRIPTION", "add_arguments", "run"]
