"""PyTorch API accuracy pre-check: run_ut / multi_run_ut executors and the op_generate script writer."""
