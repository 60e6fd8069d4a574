"""The layers of msprobe, read from the source with `ast` (imports at module level and inside functions alike):
core/io at the bottom imports no tool; tools read and write through core/io, not through compare; compare's
runner, first_divergence and ray_engine, and visualization's modules, import each other in no circle."""
import ast
import os
from typing import Dict, List, Optional, Set

import msprobe

PACKAGE_DIR = os.path.dirname(os.path.abspath(msprobe.__file__))
IO_MODULES = ("xlsx", "zipwrite", "float_text", "pt_reader", "tensor_io", "load", "normalise", "arg_schemas")
# what core/io may import besides itself: core's base modules and the native kernels
IO_MAY_IMPORT = ("msprobe.core.io", "msprobe.core.errors", "msprobe.core.log", "msprobe.core.paths",
                 "msprobe.core.naming", "msprobe.core.dump_paths", "msprobe._native",
                 "msprobe._native")
# tools that only read dumps or tensors, or write workbooks: nothing of compare
TOOLS_WITHOUT_COMPARE = ("msprobe.core.config_check", "msprobe.core.ckpt_compare", "msprobe.core.trend",
                         "msprobe.core.parse", "msprobe.core.overflow")


def _modules(package_dir) -> Dict[str, str]:
    """{dotted module name: file} of every .py file under the package."""
    root = os.path.dirname(package_dir)
    found = {}
    for folder, _, names in os.walk(package_dir):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                found[dotted[:-len(".__init__")] if dotted.endswith(".__init__") else dotted] = path
    return found


def _imported_names(tree, module, is_package) -> List[tuple]:
    """[(line, dotted name, imported name or None)] of every import in the file, at any depth: `import a.b` gives
    (line, "a.b", None), `from a import b` (line, "a", "b"); relative imports resolved."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found += [(node.lineno, base, alias.name) for alias in node.names]
    return found


def import_graph(package_dir=PACKAGE_DIR) -> Dict[str, Dict[str, int]]:
    """{module: {imported msprobe module: line}}. `from a import b` is an edge to a.b where that is a module (a
    submodule), else to a; a name of no .py file (a C extension) is kept as written."""
    modules = _modules(package_dir)
    graph = {}
    for module, path in modules.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        edges: Dict[str, int] = {}
        for line, base, name in _imported_names(tree, module, path.endswith("__init__.py")):
            if not base.startswith("msprobe"):
                continue
            target = f"{base}.{name}" if name and f"{base}.{name}" in modules else base
            if target != module:
                edges.setdefault(target, line)
        graph[module] = edges
    return graph


def find_cycle(graph, members) -> Optional[List[str]]:
    """One import circle among `members` ([a, b, ..., a]), or None."""
    members = set(members)
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, {})):
            if target not in members:
                continue
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(members):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def _describe(graph, cycle) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def _under(graph, prefix) -> Set[str]:
    return {m for m in graph if m == prefix or m.startswith(prefix + ".")}


GRAPH = import_graph()


def test_find_cycle_names_the_circle():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert find_cycle(graph, graph) == ["a", "b", "c", "a"]
    assert _describe(graph, ["a", "b", "c", "a"]) == "a (line 1) -> b (line 2) -> c (line 3) -> a"
    assert find_cycle(graph, ["a", "b", "d"]) is None


def test_import_graph_sees_imports_inside_functions(tmp_path):
    package = tmp_path / "msprobe"
    (package / "core").mkdir(parents=True)
    for name in ("__init__.py", "core/__init__.py", "core/b.py"):
        (package / name).write_text("")
    (package / "core" / "a.py").write_text("def f():\n    from msprobe.core import b\n")
    (package / "core" / "c.py").write_text("import os\n\n\ndef g():\n    from .b import name\n")
    graph = import_graph(str(package))
    assert graph["msprobe.core.a"] == {"msprobe.core.b": 2}
    assert graph["msprobe.core.c"] == {"msprobe.core.b": 5}  # relative, inside a function, a name of b


def test_compare_runner_first_divergence_and_ray_engine_import_no_circle():
    names = [f"msprobe.core.compare.{m}" for m in ("runner", "first_divergence", "ray_engine")]
    cycle = find_cycle(GRAPH, names)
    assert cycle is None, f"import circle: {_describe(GRAPH, cycle)}"
    for name in names[1:]:  # the runner runs them; they never reach back for its pieces (pair, rank_pairs)
        assert "msprobe.core.compare.runner" not in GRAPH[name], f"{name} imports msprobe.core.compare.runner"


def test_compare_package_has_no_import_circle():
    cycle = find_cycle(GRAPH, _under(GRAPH, "msprobe.core.compare") - {"msprobe.core.compare"})
    assert cycle is None, f"import circle in msprobe.core.compare: {_describe(GRAPH, cycle)}"


def test_visualization_has_no_import_circle():
    cycle = find_cycle(GRAPH, _under(GRAPH, "msprobe.visualization"))
    assert cycle is None, f"import circle in msprobe.visualization: {_describe(GRAPH, cycle)}"


def test_the_readers_and_writers_every_tool_uses_live_in_core_io():
    for name in IO_MODULES:
        assert f"msprobe.core.io.{name}" in GRAPH, f"msprobe/core/io/{name}.py is missing"
        assert f"msprobe.core.compare.{name}" not in GRAPH, \
            f"msprobe/core/compare/{name}.py: readers and writers every tool uses belong in msprobe/core/io"


def test_core_io_imports_no_tool():
    bad = [f"{module} imports {name} (line {line})" for module in sorted(_under(GRAPH, "msprobe.core.io"))
           for name, line in GRAPH[module].items()
           if not any(name == allowed or name.startswith(allowed + ".") for allowed in IO_MAY_IMPORT)]
    assert not bad, "core/io is the bottom layer: " + "; ".join(bad)
    assert GRAPH["msprobe.core.io"] == {}, "msprobe/core/io/__init__.py imports nothing (importing one reader " \
                                           "costs only that reader)"


def test_tools_read_and_write_through_core_io_not_compare():
    bad = [f"{module} imports {name} (line {line})" for tool in TOOLS_WITHOUT_COMPARE
           for module in sorted(_under(GRAPH, tool)) for name, line in GRAPH[module].items()
           if name == "msprobe.core.compare" or name.startswith("msprobe.core.compare.")]
    assert not bad, "nothing imports compare just to read a dump or write a workbook: " + "; ".join(bad)
