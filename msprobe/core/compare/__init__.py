"""Whole-network compare, framework-neutral: load dumps -> match rows -> metrics -> judge -> xlsx + advisor.

Entry point for framework adapters (PyTorch here, MindSpore in msprobe/mindspore/):

    from msprobe.core.compare import CompareOptions, compare_dumps
    compare_dumps(npu_path, bench_path, output_dir, CompareOptions(
        stack_mode=False, auto_analyze=True, fuzzy_match=False,
        data_mapping=None,   # {npu_row: bench_row} or YAML path
        api_mapping=None,    # [{ms_api, pt_api, ms_args, pt_args, ms_outputs, pt_outputs}] or YAML path
        cell_mapping=None,   # {"cell.Class": "module.Class"} or YAML path (also renames Cell. -> Module.)
        layer_mapping=None,  # {LayerClass: {npu_child: bench_child}} or YAML path
        entry_mapper=None))  # callable(entry_name) -> bench entry name, for cross-framework adapters

npu_path/bench_path: two dump.json files, two step directories (rank*/ inside) or two dump roots
(step*/rank*/). Directories are compared rank by rank in parallel, one report per rank.
In memory (graph compare, kernel compare, tools): `compare_tables(npu_table, bench_table, options)`
returns CompareRecords (numbers, reason codes, verdicts, the dtype-aware judgement, the suspect):

    from msprobe.core.compare import compare_tables
    from msprobe.core.io.load import load_dump
    records = compare_tables(load_dump("npu/dump.json"), load_dump("bench/dump.json"))
    records.suspect and print(records.suspect.name, records.suspect.summary)

Dumps and tensor files are read through core/io (`msprobe.core.io.load`, `msprobe.core.io.tensor_io`: .npy
natively, .pt via torch lazily; `register_loader(suffix, fn)` adds others). Modules: mapping, match, metrics,
tensor_pairs, cross_tool, reasons, tolerance, judge, records, render, advisor, pair (one pair), rank_pairs,
runner (many pairs), ray_engine, first_divergence, command, merge_result.
"""
from msprobe.core.compare.pair import CompareOptions, CompareOutcome, compare_pair, compare_tables
from msprobe.core.compare.runner import compare_dumps

__all__ = ["CompareOptions", "CompareOutcome", "compare_dumps", "compare_pair", "compare_tables"]
