"""Pair NPU nodes with bench nodes: default, fuzzy (`-f`) and layer-mapping (`-lm`) rules.

* default: same id, same ancestor chain, inputs and outputs equal in number, kind and shape.
* fuzzy: modules as default (id and shapes); inside a matched pair of parents the APIs are paired by
  name without call counter plus their order among equal names, then checked by shape.
* layer mapping: a module's path is renamed by the YAML ({ParentClass: {npu_child: bench_child}},
  `TopLayer` for children of the root) and matched by (path, direction, call) - class names may differ
  between frameworks - with no shape check; APIs inside a matched pair pair by mapped name and order.
"""
from collections import defaultdict
from typing import Callable, Dict, List, Optional, Tuple

from msprobe.core.naming import DIRECTIONS, EntryName
from msprobe.visualization.graph_model import API, API_COLLECTION, Graph, Node

__all__ = ["match_graphs", "LayerMap"]



def _module_call(node_id: str) -> Optional[EntryName]:
    """The parsed name of a module call node ('Module.a.b.Linear.forward.0'); None for anything else."""
    name = EntryName.parse(node_id)
    return name if name is not None and name.is_module and name.direction in DIRECTIONS else None


def _signature(graph: Graph, node: Node) -> Tuple[tuple, tuple]:
    if graph.table is None:
        return (), ()
    kinds, shapes = graph.table.columns["kind"], graph.table.columns["shape_key"]
    return (tuple((kinds[r], shapes[r]) for r in node.input_rows),
            tuple((kinds[r], shapes[r]) for r in node.output_rows))


def _link(npu_node: Node, bench_node: Node) -> None:
    npu_node.matched = bench_node
    bench_node.matched = npu_node


def _api_key(node_id: str, mapper: Optional[Callable[[str], str]]) -> str:
    name = mapper(node_id) if mapper is not None else node_id
    parsed = EntryName.parse(name)
    return parsed.op_name if parsed is not None and not parsed.is_module else name


def _pair_apis(npu_children: List[Node], bench_children: List[Node], mapper, check) -> List[Tuple[Node, Node]]:
    """APIs of two matched parents paired by (name without counter, order among equal names)."""
    bench_by_key: Dict[tuple, Node] = {}
    seen: Dict[str, int] = defaultdict(int)
    for child in bench_children:
        if child.node_type == API and child.matched is None:
            key = _api_key(child.id, None)
            bench_by_key[(key, seen[key])] = child
            seen[key] += 1
    seen.clear()
    pairs = []
    for child in npu_children:
        if child.node_type != API or child.matched is not None:
            continue
        key = _api_key(child.id, mapper)
        candidate = bench_by_key.get((key, seen[key]))
        seen[key] += 1
        if candidate is not None and check(child, candidate):
            pairs.append((child, candidate))
    return pairs


class LayerMap:
    """Module path renaming from a layer-mapping YAML: {ParentClass | 'TopLayer': {npu_path: bench_path}}."""

    def __init__(self, mapping: dict):
        self.mapping = {str(k): {str(a): str(b) for a, b in (v or {}).items()} for k, v in mapping.items()
                        if isinstance(v, dict)}
        self._mapped: Dict[str, str] = {}

    def module_key(self, node: Node) -> Optional[tuple]:
        """(bench path, direction, call) the NPU module should be compared with."""
        name = _module_call(node.id)
        if name is None:
            return None
        return self.mapped_path(node), name.direction, name.index

    def mapped_path(self, node: Node) -> str:
        cached = self._mapped.get(node.id)
        if cached is not None:
            return cached
        path = _path_of(node.id)
        ancestors = []  # nearest module ancestor first: (node, its path, its class)
        parent = node.parent
        while parent is not None:
            name = _module_call(parent.id)
            if name is not None:
                ancestors.append((parent, _path_of(parent.id), name.short_api))
            parent = parent.parent
        mapped = None
        for ancestor, ancestor_path, class_name in ancestors:
            if path.startswith(ancestor_path + "."):
                relative = path[len(ancestor_path) + 1:]
                target = self.mapping.get(class_name, {}).get(relative)
                if target is not None:
                    mapped = f"{self.mapped_path(ancestor)}.{target}"
                    break
        if mapped is None:
            top = self.mapping.get("TopLayer", {})
            for prefix, target in top.items():
                if path == prefix or path.startswith(prefix + "."):
                    mapped = target + path[len(prefix):]
                    break
        if mapped is None:
            nearest = ancestors[0] if ancestors else None
            if nearest is not None and path.startswith(nearest[1] + "."):
                mapped = f"{self.mapped_path(nearest[0])}.{path[len(nearest[1]) + 1:]}"
            else:
                mapped = path
        self._mapped[node.id] = mapped
        return mapped


def _path_of(module_id: str) -> str:
    name = _module_call(module_id)
    return name.api.rsplit(".", 1)[0] if name is not None else module_id


def _bench_module_keys(bench: Graph) -> Dict[tuple, Node]:
    keys = {}
    for node in bench.nodes.values():
        name = _module_call(node.id)
        if name is not None:
            keys.setdefault((_path_of(node.id), name.direction, name.index), node)
    return keys


def match_graphs(npu: Graph, bench: Graph, fuzzy: bool = False, layer_map: Optional[LayerMap] = None,
                 api_mapper: Optional[Callable[[str], str]] = None) -> int:
    """Link matched nodes (node.matched, both ways); returns the number of matched NPU nodes."""
    _link(npu.root, bench.root)

    def same_shapes(a: Node, b: Node) -> bool:
        return _signature(npu, a) == _signature(bench, b)

    count = 1
    if layer_map is None and not fuzzy:
        chains: Dict[tuple, int] = {}  # (parent's chain number, id) -> chain number, shared by both graphs
        npu_chain, bench_chain = _chain_numbers(npu, chains), _chain_numbers(bench, chains)
        for node in npu.preorder()[1:]:
            other = bench.nodes.get(node.id)
            if (other is not None and other.matched is None
                    and npu_chain[id(node.parent)] == bench_chain[id(other.parent)]  # same ancestor chain
                    and same_shapes(node, other)):
                _link(node, other)
                count += 1
        return count
    if layer_map is not None:
        count += _match_mapped_modules(npu, bench, layer_map)
    check = (lambda a, b: True) if layer_map is not None else same_shapes
    todo = [(npu.root, bench.root)]
    while todo:
        npu_parent, bench_parent = todo.pop()
        for child in npu_parent.children:
            if child.node_type == API or child.matched is not None:
                continue
            if layer_map is None or child.node_type == API_COLLECTION:
                other = bench.nodes.get(child.id)
                if other is not None and other.matched is None and check(child, other):
                    _link(child, other)
                    count += 1
        for child, other in _pair_apis(npu_parent.children, bench_parent.children, api_mapper, check):
            _link(child, other)
            count += 1
        for child in npu_parent.children:
            if child.matched is not None and child.children:
                todo.append((child, child.matched))
            elif layer_map is not None and child.children:
                todo.extend(_matched_descendants(child))
    return count


def _chain_numbers(graph: Graph, chains: Dict[tuple, int]) -> Dict[int, int]:
    """id(node) -> a number equal for two nodes exactly when their id chains from the root are equal.

    Linear in the node count, where comparing ancestor lists node by node is quadratic in depth."""
    numbers: Dict[int, int] = {}
    for node in graph.preorder():
        parent = numbers[id(node.parent)] if node.parent is not None else -1
        numbers[id(node)] = chains.setdefault((parent, node.id), len(chains))
    return numbers


def _match_mapped_modules(npu: Graph, bench: Graph, layer_map: LayerMap) -> int:
    """Modules anywhere in the tree, by mapped (path, direction, call): an extra layer on one side
    does not stop its children from matching."""
    module_keys, count = _bench_module_keys(bench), 0
    for node in npu.preorder()[1:]:
        key = layer_map.module_key(node)
        other = module_keys.get(key) if key else None
        if other is not None and other.matched is None:
            _link(node, other)
            count += 1
    return count


def _matched_descendants(node: Node) -> List[Tuple[Node, Node]]:
    """The nearest matched descendants of an unmatched node, as (npu, bench) pairs to descend into."""
    out, todo = [], list(node.children)
    while todo:
        child = todo.pop()
        if child.matched is not None:
            out.append((child, child.matched))
        else:
            todo.extend(child.children)
    return out
