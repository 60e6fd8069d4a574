"""`graph` command flow: read input.json, find the dump directories, build or compare graphs, write `.vis`
(and optionally `.html`) files.

    from msprobe.visualization.service import GraphOptions, run_graph
    paths = run_graph("input.json", "./out", GraphOptions(fuzzy_match=True, html=True))

`graph_verdict(npu_dir, bench_dir)` compares two dump directories the same way and returns the graph's verdict
(verdict.GraphVerdict) without writing anything.

input.json: `{"npu_path": DIR, "bench_path": DIR (compare mode; absent: build mode), "is_print_compare_log": bool}`.
"""
import os
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, List, Optional, Union

from msprobe.core.errors import ConfigError
from msprobe.core.log import logger
from msprobe.core.paths import load_json, load_yaml, make_dir
from msprobe.visualization import compare_bridge as bridge
from msprobe.visualization.distributed import link_ranks
from msprobe.visualization.graph_model import Graph, build_graph
from msprobe.visualization.layout import GraphJob, list_jobs, pair_jobs
from msprobe.visualization.matching import LayerMap, match_graphs
from msprobe.visualization.overflow import mark_overflow
from msprobe.visualization.precision import TASK_OF_MODE, colors_for, compute_precision, tooltips_for
from msprobe.visualization.stacks import read_stacks
from msprobe.visualization.verdict import GraphVerdict, verdict_of_document
from msprobe.visualization.vis_writer import build_document, compare_document, write_vis

__all__ = ["GraphOptions", "run_graph", "load_graph", "compare_graphs", "graph_verdict"]


@dataclass
class GraphOptions:
    layer_mapping: Optional[str] = None  # YAML path
    overflow_check: bool = False
    fuzzy_match: bool = False
    complete_stack: bool = False
    html: bool = False
    framework: str = "pytorch"
    processes: Optional[int] = None
    timestamp: Optional[str] = None


def load_graph(directory: str, options: GraphOptions) -> Graph:
    """The graph of one dump directory (construct.json + dump.json + stack.json)."""
    construct = load_json(os.path.join(directory, "construct.json"), what="construct file")
    if construct is None:
        construct = {}
    if not isinstance(construct, dict):
        raise ConfigError(f"construct file '{directory}/construct.json' must hold a JSON object.")
    table = bridge.load_table(os.path.join(directory, "dump.json"))
    framework = table.header.get("framework") or options.framework
    stacks = read_stacks(os.path.join(directory, "stack.json"))
    return build_graph(construct, table, stacks, options.complete_stack, framework)


def _read_input(path: Union[str, dict]) -> dict:
    content = path if isinstance(path, dict) else load_json(path, what="graph input file (-i)")
    if not isinstance(content, dict) or not content.get("npu_path"):
        raise ConfigError(f"graph input file '{path}' must be a JSON object with 'npu_path' "
                          "(and 'bench_path' to compare two runs).")
    return content


def _layer_map(options: GraphOptions) -> Optional[LayerMap]:
    if not options.layer_mapping:
        return None
    content = load_yaml(options.layer_mapping, what="layer mapping file (-lm)")
    if content is None:
        content = {}
    if not isinstance(content, dict) or any(not isinstance(v, dict) for v in content.values()):
        raise ConfigError(f"layer mapping file '{options.layer_mapping}' must map layer class names (or "
                          "TopLayer) to {npu_child: bench_child} dictionaries, e.g. 'TopLayer: {block: mlp}'.")
    return LayerMap(content)


def _html_path(vis_path: str) -> str:
    return vis_path[:-len(".vis")] + ".html"


def _write(document: dict, output_dir: str, name: str, options: GraphOptions) -> List[str]:
    path = write_vis(os.path.join(output_dir, name + ".vis"), document)
    written = [path]
    if options.html:
        from msprobe.visualization.html_viewer import write_html

        written.append(write_html(_html_path(path), document, title=name))
    return written


def compare_graphs(npu_dir: str, bench_dir: str, options: GraphOptions, layer_map=None):
    """(npu graph, bench graph, mode) of two dump directories, matched and scored; nothing is written."""
    npu, bench = load_graph(npu_dir, options), load_graph(bench_dir, options)
    mode = bridge.check_same_mode(npu.table, bench.table)
    cross = npu.framework == "mindspore" and bench.framework == "pytorch"
    if cross and layer_map is None:
        layer_map = LayerMap({})  # Cell vs Module: match by module path, class names differ
    api_mapper = bridge.ms_to_pt_mapper() if cross else None
    npu.matched_count = match_graphs(npu, bench, options.fuzzy_match, layer_map, api_mapper)
    compute_precision(mode, npu, bench, options.processes, options.fuzzy_match)
    return npu, bench, mode


def _compare_one(npu_job: GraphJob, bench_job: GraphJob, options: GraphOptions, layer_map, print_log: bool):
    npu, bench, mode = compare_graphs(npu_job.directory, bench_job.directory, options, layer_map)
    if options.overflow_check:
        mark_overflow(npu)
        mark_overflow(bench)
    if print_log:
        logger.info("graph compare %s: %d NPU nodes, %d matched, %d bench nodes (%s mode)",
                    npu_job.directory, len(npu.nodes), npu.matched_count, len(bench.nodes), mode)
        _log_suspect(npu)
    return npu, bench, mode


def _log_suspect(npu: Graph) -> None:
    """One line: the node the graph marks darkest, which is compare's advisor's suspect."""
    records = npu.records
    if records is None:
        return
    if records.suspect is None:
        logger.info("graph verdict: no node differs beyond the dtype tolerance with inputs that agree (no suspect).")
        return
    node = next((n for n in npu.nodes.values() if records.suspect.row in n.input_rows
                 or records.suspect.row in n.output_rows), None)
    logger.info("graph verdict: first suspect node %s (%s)", node.id if node else records.suspect.entry,
                records.suspect.summary)


def _by_step(jobs: List[GraphJob]) -> Dict[Optional[int], List[int]]:
    groups = defaultdict(list)
    for index, job in enumerate(jobs):
        groups[job.step].append(index)
    return groups


def _link_distributed(jobs: List[GraphJob], graphs: List[Graph]) -> None:
    for indices in _by_step(jobs).values():
        ranked = {jobs[i].rank: graphs[i] for i in indices if jobs[i].rank is not None}
        if len(ranked) > 1:
            link_ranks(ranked)


def run_graph(input_path: Union[str, dict], output_path: str, options: Optional[GraphOptions] = None) -> List[str]:
    """Build (npu_path only) or compare (npu_path + bench_path) graphs; returns the written files. `input_path`:
    the -i JSON file, or its content as a dict."""
    options = options or GraphOptions()
    start = time.time()
    content = _read_input(input_path)
    print_log = bool(content.get("is_print_compare_log", True))
    timestamp = options.timestamp or time.strftime("%Y%m%d%H%M%S")
    bench_path = content.get("bench_path")
    if bench_path:
        pairs = pair_jobs(content["npu_path"], bench_path)
        layer_map = _layer_map(options)
    else:
        jobs = list_jobs(content["npu_path"], "npu_path")
        if options.layer_mapping:
            logger.warning("-lm (layer mapping) applies to compare mode only; ignored when building one graph.")
    output_dir = make_dir(output_path, what="output_path (-o)")
    written: List[str] = []
    if bench_path:
        results = [_compare_one(n, b, options, layer_map, print_log) for n, b in pairs]
        _link_distributed([n for n, _ in pairs], [r[0] for r in results])
        _link_distributed([b for _, b in pairs], [r[1] for r in results])
        for (npu_job, _), (npu, bench, mode) in zip(pairs, results):
            task = TASK_OF_MODE[mode]
            document = compare_document(npu, bench, task, tooltips_for(task), colors_for(task),
                                        options.overflow_check)
            written += _write(document, output_dir, f"compare{npu_job.tag}_{timestamp}", options)
    else:
        graphs = [load_graph(job.directory, options) for job in jobs]
        for graph in graphs:
            if options.overflow_check:
                mark_overflow(graph)
        _link_distributed(jobs, graphs)
        for job, graph in zip(jobs, graphs):
            written += _write(build_document(graph, options.overflow_check), output_dir,
                              f"build{job.tag}_{timestamp}", options)
    logger.info("graph: %d file(s) written in %.2fs: %s", len(written), time.time() - start,
                ", ".join(os.path.basename(p) for p in written))
    return written


def graph_verdict(npu_dir: str, bench_dir: str, fuzzy_match: bool = False,
                  framework: str = "pytorch") -> GraphVerdict:
    """Compare the graphs of two dump directories (each with construct.json, dump.json, stack.json), as
    `msprobe graph` does, and return the graph's verdict; nothing is written.

        from msprobe.visualization import graph_verdict
        verdict = graph_verdict("npu/step0/rank", "gpu/step0/rank")
        verdict.worst_node, verdict.first_node, verdict.suspect, verdict.suspect_node
    """
    options = GraphOptions(fuzzy_match=fuzzy_match, framework=framework)
    npu, bench, mode = compare_graphs(npu_dir, bench_dir, options)
    task = TASK_OF_MODE[mode]
    document = compare_document(npu, bench, task, tooltips_for(task), colors_for(task), False)
    records = npu.records
    suspect = records.suspect.name if records is not None and records.suspect is not None else None
    bench_only = suspect is not None and records.npu_pos[records.suspect.row] < 0
    return verdict_of_document(document, suspect, bench_only)
