"""Compare engine on Ray: each (step, rank) pair is a Ray task on an existing cluster, run where its dumps are.

    outcomes = compare_pairs_on_ray(pairs, output_dir, options, address="10.0.0.1:6379")

Placement. First every alive node is asked (one small task pinned to it) which of the pairs' dump.json
files it can read. If every node reads every pair (a shared filesystem), tasks go wherever Ray has a free
CPU. Otherwise (dumps on node-local disks) each pair is pinned to a node that holds both of its dump.json
files (the one with the fewest pairs so far); a pair that no node holds whole is an error naming it.

Results. A task compares its pair with the local engine's code into a scratch folder on its node and
returns the files' bytes and the pair's summary; the driver writes them into output_dir. So the output is
the same as the local engine's wherever the dumps were, and at most 2 × (cluster CPUs) results are in
flight at once: driver memory does not grow with the number of ranks. Ray is an optional extra
(`pip install 'msprobe[ray]'`).
"""
import os
from dataclasses import replace
from typing import List, Optional

from msprobe.core.errors import CompareError, UnsupportedError
from msprobe.core.log import logger
from msprobe.core.paths import atomic_write_bytes

__all__ = ["compare_pairs_on_ray"]


def _ray():
    try:
        import ray
    except ImportError:
        raise UnsupportedError("--engine ray needs Ray: pip install 'msprobe[ray]' (or pip install ray).") from None
    return ray


def _compare_in_task(tag, npu_json, bench_json, options):
    import tempfile

    from msprobe.core.compare.runner import compare_pair

    with tempfile.TemporaryDirectory(prefix="msprobe_ray_") as scratch:
        outcome = compare_pair(npu_json, bench_json, scratch, options, tag)
        files = {}
        for name in sorted(os.listdir(scratch)):
            with open(os.path.join(scratch, name), "rb") as handle:
                files[name] = handle.read()
    return files, outcome.summary


def _readable(paths):
    return [os.path.isfile(path) for path in paths]


def _placement(ray, pairs) -> List[Optional[str]]:
    """Node id per pair (None: anywhere, the dumps are shared)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [node["NodeID"] for node in ray.nodes() if node.get("Alive")]
    paths = [path for _, npu, bench in pairs for path in (npu, bench)]
    probe = ray.remote(num_cpus=0)(_readable)
    seen = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                    .remote(paths) for node in nodes])
    holds = {node: [seen_by[2 * i] and seen_by[2 * i + 1] for i in range(len(pairs))]
             for node, seen_by in zip(nodes, seen)}
    if all(all(flags) for flags in holds.values()):
        return [None] * len(pairs)
    load = dict.fromkeys(nodes, 0)
    placed = []
    for index, (tag, npu, _) in enumerate(pairs):
        candidates = [node for node in nodes if holds[node][index]]
        if not candidates:
            raise CompareError(f"no Ray node can read both dumps of pair '{tag or npu}' ({npu}); put each "
                               "rank's NPU and bench dumps on the same node or on a shared filesystem.")
        node = min(candidates, key=lambda n: load[n])
        load[node] += 1
        placed.append(node)
    return placed


def _write(files, output_dir):
    for name, data in files.items():
        atomic_write_bytes(os.path.join(output_dir, os.path.basename(name)), data)


def compare_pairs_on_ray(pairs, output_dir, options, address=None):
    """[CompareOutcome] of every (tag, npu dump.json, bench dump.json) pair, compared as Ray tasks."""
    from msprobe.core.compare.runner import CompareOutcome

    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=address or "auto", logging_level="ERROR", log_to_driver=False, configure_logging=False)
    try:
        task = ray.remote(num_cpus=1)(_compare_in_task)
        placed = _placement(ray, pairs)
        limit = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        task_options = replace(options, processes=1, progress=False, engine="local", address=None)
        outcomes, pending, by_ref = [None] * len(pairs), [], {}
        for index, (tag, npu, bench) in enumerate(pairs):
            if len(pending) >= limit:
                done, pending = ray.wait(pending, num_returns=1)
                _collect(ray, done, by_ref, outcomes, output_dir, CompareOutcome)
            strategy = (NodeAffinitySchedulingStrategy(placed[index], soft=False) if placed[index]
                        else "DEFAULT")
            ref = task.options(scheduling_strategy=strategy).remote(tag, npu, bench, task_options)
            by_ref[ref] = index
            pending.append(ref)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            _collect(ray, done, by_ref, outcomes, output_dir, CompareOutcome)
        nodes = len({node for node in placed if node}) or len([n for n in ray.nodes() if n.get("Alive")])
        logger.info("ray: %d pair(s) compared on %d node(s)%s.", len(pairs), nodes,
                    "" if placed[0] is None else ", each where its dumps are")
        return outcomes
    finally:
        ray.shutdown()


def _collect(ray, done, by_ref, outcomes, output_dir, outcome_type):
    for ref in done:
        files, summary = ray.get(ref)
        _write(files, output_dir)
        xlsx = next((os.path.join(output_dir, n) for n in files if n.endswith(".xlsx")), None)
        advisor = next((os.path.join(output_dir, n) for n in files if n.startswith("advisor")), None)
        summary = dict(summary, report=xlsx)
        outcomes[by_ref.pop(ref)] = outcome_type(xlsx, advisor, None, None, summary)
