"""free_benchmark for MindSpore PyNative: the perturbations the core task uses (see perturb.py)."""
