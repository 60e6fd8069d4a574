"""Torch side of the data dump: adapter, API/module/ATen/distributed hooks, backward tracking."""
