"""ckpt_compare: two checkpoints compared parameter by parameter, one tensor pair in memory at a time."""
