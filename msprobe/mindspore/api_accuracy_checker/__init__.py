"""MindSpore API accuracy pre-check (run_ut / multi_run_ut): mint and Tensor APIs against a CPU bench."""
