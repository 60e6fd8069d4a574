"""Compare engine on Ray: each (step, rank) pair is a Ray task on an existing cluster, run where its dumps are.

    outcomes, divergences = compare_tree_on_ray("/local/dump/npu", "/local/dump/bench", output_dir, options)

Listing and placement. First every alive node lists (one zero-CPU task pinned to it) the step*/rank*
folders it holds under the two dump roots. The job's pairs come from all the listings together, so a
rank whose dumps sit on another node's disk than the driver's is compared too. If every node holds every
pair (a shared filesystem), tasks go wherever Ray has a free CPU. Otherwise (dumps on node-local disks)
each pair is pinned to a node that holds both of its dump.json files (the one with the fewest pairs so
far); a pair that no node holds whole is an error naming it.

Results. A task compares its pair with the local engine's code into a scratch folder on its node and
returns the files' bytes, the pair's summary, the id of the node it ran on (one line per pair on the
terminal) and, for fingerprint dumps (summary_mode xor / md5), the pair's first-divergence record, made
there since the driver may not read the dumps; the driver writes the files into output_dir. So the output
is the same as the local engine's wherever the dumps were, and at most 2 × (cluster CPUs) results are in
flight at once: driver memory does not grow with the number of ranks. Ray is an optional extra
(`pip install 'msprobe[ray]'`).

A cluster msprobe starts itself (`--address local`) gets node address 127.0.0.1, no dashboard, and Ray's token
authentication with a fresh random token for its lifetime (unless the user set RAY_AUTH_MODE): Ray's gRPC
servers listen on every interface whatever node address they are given, so the token is what keeps other hosts
out (docs/scale.md, "Ray on a shared network").
"""
import os
import secrets
import sys
from dataclasses import replace
from typing import List, Optional

from msprobe.core.compare.first_divergence import fingerprint_record
from msprobe.core.compare.pair import CompareOutcome, compare_pair
from msprobe.core.compare.rank_pairs import list_rank_dirs, pair_rank_dirs
from msprobe.core.errors import CompareError, UnsupportedError
from msprobe.core.log import logger
from msprobe.core.paths import atomic_write_bytes

__all__ = ["compare_tree_on_ray"]


def _ray():
    try:
        import ray
    except ImportError:
        raise UnsupportedError("--engine ray needs Ray: pip install 'msprobe[ray]' (or pip install ray).") from None
    return ray


def _compare_in_task(tag, npu_json, bench_json, options):
    import tempfile

    import ray

    with tempfile.TemporaryDirectory(prefix="msprobe_ray_") as scratch:
        outcome = compare_pair(npu_json, bench_json, scratch, options, tag)
        files = {}
        for name in sorted(os.listdir(scratch)):
            with open(os.path.join(scratch, name), "rb") as handle:
                files[name] = handle.read()
    return files, outcome.summary, ray.get_runtime_context().get_node_id(), fingerprint_record(npu_json, bench_json)


def _listings(ray, npu_dir, bench_dir):
    """{alive node id: list_rank_dirs on that node}."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [node["NodeID"] for node in ray.nodes() if node.get("Alive")]
    probe = ray.remote(num_cpus=0)(list_rank_dirs)
    return dict(zip(nodes, ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                                    .remote(npu_dir, bench_dir) for node in nodes])))


def _placement(pairs, listings) -> List[Optional[str]]:
    """Node id per pair (None: anywhere, the dumps are shared)."""
    holds = {node: [npu in listing["files"] and bench in listing["files"] for _, npu, bench in pairs]
             for node, listing in listings.items()}
    if all(all(flags) for flags in holds.values()):
        return [None] * len(pairs)
    load = dict.fromkeys(listings, 0)
    placed = []
    for index in range(len(pairs)):
        candidates = [node for node in listings if holds[node][index]]
        if not candidates:
            raise CompareError(_torn_pair(index, pairs, holds, listings))
        node = min(candidates, key=lambda n: load[n])
        load[node] += 1
        placed.append(node)
    return placed


def _torn_pair(index, pairs, holds, listings):
    """The message for a pair no node holds whole (and how many more follow it)."""
    tag, npu, bench = pairs[index]
    on = [sum(path in listing["files"] for listing in listings.values()) for path in (npu, bench)]
    torn = sum(not any(flags[i] for flags in holds.values()) for i in range(index + 1, len(pairs)))
    return (f"no Ray node holds both dumps of pair '{tag or npu}' ({npu} is on {on[0]} node(s), {bench} on "
            f"{on[1]}, none has both){f' (and {torn} more pair(s))' if torn else ''}; put each rank's NPU and "
            "bench dumps on the same node (same paths) or on a shared filesystem.")


def _write(files, output_dir):
    for name, data in files.items():
        atomic_write_bytes(os.path.join(output_dir, os.path.basename(name)), data)


def compare_tree_on_ray(npu_dir, bench_dir, output_dir, options):
    """([CompareOutcome], [first-divergence record or None]) of every (step, rank) pair of two dump roots
    held by the cluster's nodes, compared as Ray tasks; pairs in rank_pairs.find_rank_pairs's order."""
    ray, saved = connect(options.address)
    try:
        listings = _listings(ray, npu_dir, bench_dir)
        pairs = pair_rank_dirs(npu_dir, bench_dir, list(listings.values()))
        placed = _placement(pairs, listings)
        outcomes, ran_on, divergences = _run_pairs(ray, pairs, placed, output_dir, options)
        logger.info("ray: %d pair(s) compared on %d of %d node(s)%s.", len(pairs), len(set(ran_on)), len(listings),
                    "" if placed[0] is None else ", each where its dumps are")
        return outcomes, divergences
    finally:
        ray.shutdown()
        _restore(saved)


_AUTH_VARIABLES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")


def connect(address):
    """(ray, environment to give back after ray.shutdown with _restore): ray.init on the cluster at `address`
    (None: RAY_ADDRESS or "auto"), or with "local" on a cluster of this machine that msprobe starts: node
    address 127.0.0.1, no dashboard, and token authentication with a fresh token unless the user chose
    RAY_AUTH_MODE. Ray reads its authentication settings when it is imported, so they are set before."""
    settings = dict(logging_level="ERROR", log_to_driver=False, configure_logging=False)
    saved = {}
    if address == "local" and not os.environ.get("RAY_AUTH_MODE"):
        saved = {name: os.environ.get(name) for name in _AUTH_VARIABLES}
        if "ray" in sys.modules:
            logger.warning("ray was imported before msprobe started its cluster: Ray's own authentication "
                           "default applies (docs/scale.md, 'Ray on a shared network').")
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    try:
        ray = _ray()
        if address == "local":
            ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1", **settings)
        else:
            ray.init(address=address or "auto", **settings)
    except BaseException:
        _restore(saved)
        raise
    return ray, saved


def _restore(saved):
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _run_pairs(ray, pairs, placed, output_dir, options):
    """([CompareOutcome], [node id each pair ran on], [first-divergence record or None]), at most
    2 × (cluster CPUs) results in flight."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=1)(_compare_in_task)
    limit = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
    task_options = replace(options, processes=1, progress=False, engine="local", address=None)
    results = ([None] * len(pairs), [None] * len(pairs), [None] * len(pairs))  # outcomes, nodes, divergences
    pending, by_ref = [], {}
    for index, (tag, npu, bench) in enumerate(pairs):
        if len(pending) >= limit:
            done, pending = ray.wait(pending, num_returns=1)
            _collect(ray, done, by_ref, pairs, results, output_dir)
        strategy = NodeAffinitySchedulingStrategy(placed[index], soft=False) if placed[index] else "DEFAULT"
        ref = task.options(scheduling_strategy=strategy).remote(tag, npu, bench, task_options)
        by_ref[ref] = index
        pending.append(ref)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        _collect(ray, done, by_ref, pairs, results, output_dir)
    return results


def _collect(ray, done, by_ref, pairs, results, output_dir):
    outcomes, ran_on, divergences = results
    for ref in done:
        files, summary, node, divergence = ray.get(ref)
        _write(files, output_dir)
        xlsx = next((os.path.join(output_dir, n) for n in files if n.endswith(".xlsx")), None)
        advisor = next((os.path.join(output_dir, n) for n in files if n.startswith("advisor")), None)
        index = by_ref.pop(ref)
        outcomes[index] = CompareOutcome(xlsx, advisor, None, None, dict(summary, report=xlsx))
        ran_on[index], divergences[index] = node, divergence
        logger.info("ray: pair '%s' ran on node %s", pairs[index][0] or pairs[index][1], node)
