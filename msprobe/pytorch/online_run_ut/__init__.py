"""Online run_ut for PyTorch: tensor packing for the wire and the bench side's run_ut callbacks."""
