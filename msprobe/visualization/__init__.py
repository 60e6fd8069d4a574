"""Graph visualisation of dumps: the model's module tree from construct.json + dump.json + stack.json,
compared node by node with a bench run, written as `.vis` for tb-graph-ascend and as a self-contained HTML viewer.

    from msprobe.visualization import GraphOptions, run_graph
    run_graph("input.json", "./out", GraphOptions(html=True))

Modules: layout (which dump dirs), graph_model (tree), stacks, matching, compare_bridge (the only caller of
msprobe.core.compare), precision (index, colours), overflow, distributed, vis_writer, html_viewer, service.
"""

__all__ = ["GraphOptions", "run_graph"]


def __getattr__(name):
    if name in __all__:
        from msprobe.visualization import service

        return getattr(service, name)
    raise AttributeError(f"module 'msprobe.visualization' has no attribute '{name}'")
