"""Graph visualisation of dumps: the model's module tree from construct.json + dump.json + stack.json,
compared node by node with a bench run, written as `.vis` for tb-graph-ascend and as a self-contained HTML viewer.

    from msprobe.visualization import GraphOptions, run_graph
    run_graph("input.json", "./out", GraphOptions(html=True))
    graph_verdict("npu/step0/rank", "gpu/step0/rank").first_node   # the node the graph marks first

Modules: layout (which dump dirs), graph_model (tree), stacks, matching, compare_bridge (the only caller of
msprobe.core.compare), verdict (node levels from compare's judgement and advisor), precision (index,
colours), overflow, distributed, vis_writer, html_viewer, service (the graph flow and graph_verdict). Imports go one
way, with no cycle (tests/core/test_layers.py): service imports precision, which imports verdict.
"""

__all__ = ["GraphOptions", "run_graph", "graph_verdict", "GraphVerdict"]


def __getattr__(name):
    if name == "GraphVerdict":
        from msprobe.visualization import verdict

        return verdict.GraphVerdict
    if name in __all__:
        from msprobe.visualization import service

        return getattr(service, name)
    raise AttributeError(f"module 'msprobe.visualization' has no attribute '{name}'")
