"""compile_check's dump_graphs: keep every FX graph Dynamo hands the backend, and write those of a module.

GraphRecorder wraps the user's backend. Under the dump, Dynamo compiles one graph piece per module
frame, so the module paths inside a piece are relative to that frame; what identifies a module for
sure is its parameters, which Dynamo hands the backend as graph inputs. Each node is therefore mapped
to the module owning a parameter it reads (named_modules() paths, no `_orig_mod`), and each graph to
the modules whose parameters it takes. write_for() writes the graphs of a module as graph_<n>.py (the
graph's code) and graphs.json (per node: its op, target and module).
"""
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
        self.graphs.append({"code": graph_module.code, "nodes": nodes, "modules": sorted(set(owner_of.values()))})
        backend = self.backend
        if isinstance(backend, str):
            from torch._dynamo.backends.registry import lookup_backend

            backend = lookup_backend(backend)
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
            listing.append({"file": os.path.basename(path), "modules": graph["modules"], "nodes": graph["nodes"]})
        with open(os.path.join(folder, "graphs.json"), "w", encoding="utf-8") as handle:
            json.dump({"module": module_path, "graphs": listing}, handle, indent=2)
        return written
