"""Precision standards of the API pre-check (run_ut), shared by PyTorch and MindSpore: pure numpy.

`metrics` computes error measures, `output_check` judges one output for run_ut, `new_standard`
judges NPU against GPU for api_precision_compare, `standards` says which standard an API uses.
"""
