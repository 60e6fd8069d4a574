"""Benchmark-free accuracy check: the framework-neutral part (settings, judgement, preheat, CSV).

The collector task (msprobe/core/dump/tasks/free_benchmark.py) runs an API a second time on perturbed
inputs through a framework's perturbation module (msprobe/pytorch/free_benchmark, msprobe/mindspore/
free_benchmark) and asks this package whether the two outputs agree:

    settings.FreeBenchmarkSettings   the validated "free_benchmark" section, rules between keys included
    judge                            per-dtype tolerances and thresholds, the ratio metric, symbol flipping
    preheat.Preheat                  per-API thresholds learnt during the first steps
    csv_writer.ResultCsv             {dump_path}/free_benchmark.csv
"""
