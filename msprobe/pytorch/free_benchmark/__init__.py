"""free_benchmark for PyTorch: the torch perturbations the core task uses (see perturb.py)."""
