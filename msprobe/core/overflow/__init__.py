"""Overflow hunting shared by both frameworks: NaN origin (origin.py), the run_overflow_check re-run
(rerun.py) and the MindSpore L2 first-kernel search (kernel_overflow.py)."""
