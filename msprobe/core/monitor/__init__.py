"""Framework-neutral parts of grad_probe and monitor: statistics names, anomaly rules, summaries, writers, plots.

Nothing here imports torch or mindspore; the adapters in `msprobe/pytorch/monitor/` and
`msprobe/mindspore/monitor/` compute statistics on their tensors and hand plain floats to this package.
"""
