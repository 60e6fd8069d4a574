"""compile_check's dump_graphs: keep every FX graph Dynamo hands the backend, and write those of a module.

GraphRecorder wraps the user's backend. Under the dump, Dynamo compiles one graph piece per module
frame, so the module paths inside a piece are relative to that frame; what identifies a module for
sure is its parameters, which Dynamo hands the backend as graph inputs. Each node is therefore mapped
to the module owning a parameter it reads (named_modules() paths, no `_orig_mod`), and each graph to
the modules whose parameters it takes. write_for() writes the graphs of a module as graph_<n>.py (the
graph's code) and graphs.json (per node: its op, target and module).

When the backend compiles with Inductor (by name or by calling compile_fx), each graph's compile runs
with Inductor's provenance tracking on (and its caches off: a cache hit generates no code, hence no
mapping), its backward lowered at once: per generated kernel (`cpp_fused_*` on CPU, `triton_*` on GPU,
`extern_kernels.*` for library calls), the post-grad ATen nodes it computes and the Dynamo FX nodes
those come from (forward: Inductor's provenance; backward: the forward ATen node with the same autograd
sequence number, recorded by a post-grad pass). graphs.json lists them under each graph's "kernels", and the generated
code is written beside the graph (graph_<n>.inductor_<phase>.py).
"""
import contextlib
import json
import os

__all__ = ["GraphRecorder"]


class GraphRecorder:
    """A backend that records the graphs, then hands them to `backend` (a name or a callable)."""

    def __init__(self, backend, model):
        from msprobe.pytorch.dump.compiled import eager_name

        self.backend = backend
        self.owners = {id(param): eager_name(name.rpartition(".")[0]) for name, param in model.named_parameters()}
        self.compiler_name = backend if isinstance(backend, str) else getattr(backend, "__name__", "backend")
        self.graphs = []

    def __call__(self, graph_module, example_inputs):
        inputs = iter(example_inputs)
        owner_of = {}  # placeholder node -> module path of the parameter it stands for
        for node in graph_module.graph.nodes:
            if node.op == "placeholder":
                owner = self.owners.get(id(next(inputs, None)))
                if owner is not None:
                    owner_of[node] = owner
        nodes = []
        for node in graph_module.graph.nodes:
            owners = [owner_of[arg] for arg in node.all_input_nodes if arg in owner_of]
            nodes.append({"node": node.name, "op": node.op, "target": str(node.target),
                          "module": owner_of.get(node) or (owners[0] if owners else "")})
        graph = {"code": graph_module.code, "nodes": nodes, "modules": sorted(set(owner_of.values())),
                 "kernels": [], "inductor_code": []}
        self.graphs.append(graph)
        backend = self.backend
        if isinstance(backend, str):
            from torch._dynamo.backends.registry import lookup_backend

            backend = lookup_backend(backend)
        with _inductor_kernels(graph):
            return backend(graph_module, example_inputs)

    def write_for(self, module_path, folder):
        """Write the graphs with nodes inside `module_path`; returns their file paths."""
        os.makedirs(folder, exist_ok=True)
        written, listing = [], []
        for index, graph in enumerate(self.graphs):
            if not any(m == module_path or m.startswith(module_path + ".") for m in graph["modules"]):
                continue
            path = os.path.join(folder, f"graph_{index}.py")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(graph["code"])
            written.append(path)
            for phase, code in graph["inductor_code"]:
                with open(os.path.join(folder, f"graph_{index}.inductor_{phase}.py"), "w", encoding="utf-8") as handle:
                    handle.write(code)
            module_of = {node["node"]: node["module"] for node in graph["nodes"]}
            kernels = [{**kernel, "modules": sorted({module_of[n] for n in kernel["fx_nodes"] if module_of.get(n)})}
                       for kernel in graph["kernels"]]
            listing.append({"file": os.path.basename(path), "modules": graph["modules"], "nodes": graph["nodes"],
                            "kernels": kernels})
        with open(os.path.join(folder, "graphs.json"), "w", encoding="utf-8") as handle:
            json.dump({"module": module_path, "graphs": listing}, handle, indent=2)
        return written


@contextlib.contextmanager
def _inductor_kernels(graph):
    """While a graph compiles: Inductor's kernels, each with its post-grad ATen nodes and (forward) the
    FX nodes they come from, appended to graph["kernels"]; the generated code to graph["inductor_code"]."""
    import torch
    from torch._inductor import config as inductor_config
    from torch._inductor import debug
    from torch._inductor.graph import GraphLowering

    seq_nrs = []  # per post-grad graph (forward, then backward): node name -> autograd sequence number
    forward_fx = {}  # sequence number -> FX nodes of the forward's ATen nodes with that number
    users_pass = inductor_config.post_grad_custom_post_pass

    def record_seq_nrs(fx_graph):
        if users_pass is not None:
            users_pass(fx_graph)
        seq_nrs.append({node.name: node.meta.get("seq_nr") for node in fx_graph.nodes})

    def save_output_code(code):
        phase = "forward" if not graph["inductor_code"] else "backward"
        graph["inductor_code"].append((phase, code))
        seq_of = seq_nrs[-1] if seq_nrs else {}
        post_to_pre = debug._inductor_post_to_pre_grad_nodes.get("postToPre", {}) if phase == "forward" else {}
        if phase == "forward":  # a backward ATen node comes from the forward op with its sequence number
            for post, pres in post_to_pre.items():
                if seq_of.get(post) is not None:
                    forward_fx.setdefault(seq_of[post], set()).update(pres)
        for handle, post_nodes in debug._inductor_triton_kernel_to_post_grad_node_info.items():
            kernel = handle.rpartition(":")[0] or handle  # "<name>:<debug handle>"
            fx_nodes = {pre for post in post_nodes for pre in post_to_pre.get(post, [])}
            if phase == "backward":
                fx_nodes = {pre for post in post_nodes for pre in forward_fx.get(seq_of.get(post), ())}
            graph["kernels"].append({"kernel": kernel, "phase": phase, "extern": kernel.startswith("extern_kernels."),
                                     "aten_nodes": list(post_nodes), "fx_nodes": sorted(fx_nodes)})
        debug._inductor_triton_kernel_to_post_grad_node_info.clear()  # the backward's table starts empty

    with contextlib.ExitStack() as stack:
        stack.enter_context(inductor_config.patch({"trace.provenance_tracking_level": 1, "fx_graph_cache": False,
                                                   "post_grad_custom_post_pass": record_seq_nrs}))
        stack.enter_context(torch._functorch.config.patch(enable_autograd_cache=False,
                                                          force_non_lazy_backward_lowering=True))
        previous = GraphLowering.__dict__.get("save_output_code")  # as stored (None, or a staticmethod)
        GraphLowering.save_output_code = staticmethod(save_output_code)
        debug._inductor_triton_kernel_to_post_grad_node_info.clear()
        try:
            yield
        finally:
            GraphLowering.save_output_code = previous
