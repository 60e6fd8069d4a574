"""The trend store: every (step, rank, call, statistic) of a job in one DuckDB file, and its heatmaps."""
