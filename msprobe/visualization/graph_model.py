"""Build a model's node tree from construct.json + dump.json rows + stack.json.

One node per distinct name in construct.json (keys and parents), under a root `DefaultModel`:
modules (`Module.` / `Cell.`, node_type 0), APIs (node_type 1) and API collections
(`Apis_Between_Modules.k`, node_type 9: two or more consecutive APIs directly under the root).
A parent that is neither a module nor an API (e.g. `optimizer`, whose `step()` ran inside start/stop)
becomes a plain container instead of an error. Dump entries missing from construct.json (an L1
dump) hang under the root in dump order. The root's children are split into micro steps: a forward
module that follows a backward module starts the next one. A node that is its own ancestor (a parent
cycle in construct.json, or a self-parent) is cut from its parent and hung under the root, with a warning.
"""
from typing import Dict, List, Optional

from msprobe.core.log import logger
from msprobe.core.naming import is_module_name
from msprobe.visualization.stacks import node_stack

__all__ = ["Node", "Graph", "build_graph", "ROOT_ID", "MODULE", "API", "API_COLLECTION", "COLLECTION_PREFIX"]

ROOT_ID = "DefaultModel"
MODULE, API, API_COLLECTION = 0, 1, 9
COLLECTION_PREFIX = "Apis_Between_Modules"


class Node:
    """One graph node. `input_rows` / `output_rows` index the dump table's rows."""
    __slots__ = ("id", "node_type", "parent", "children", "input_rows", "output_rows", "stack", "matched",
                 "data", "micro_step_id", "order", "matched_distributed", "metrics", "depth")

    def __init__(self, node_id: str, node_type: int):
        self.id = node_id
        self.node_type = node_type
        self.parent: Optional["Node"] = None
        self.children: List["Node"] = []
        self.input_rows: List[int] = []
        self.output_rows: List[int] = []
        self.stack: List[str] = []
        self.matched: Optional["Node"] = None
        self.data: dict = {}
        self.micro_step_id: Optional[int] = None
        self.order = -1  # pre-order position: execution order of the dump
        self.matched_distributed: Optional[dict] = None
        self.metrics: Dict[int, dict] = {}  # row index -> metric cells (compare mode, NPU side)
        self.depth = 0  # number of ancestors, set by build_graph

    def ancestors(self) -> List[str]:
        """Ids from the root down to the parent: O(depth), so callers must not ask it for every node."""
        chain, node = [], self.parent
        while node is not None:
            chain.append(node.id)
            node = node.parent
        return chain[::-1]

    def is_forward_module(self) -> bool:
        return self.node_type == MODULE and ".forward." in self.id

    def is_backward_module(self) -> bool:
        return self.node_type == MODULE and ".backward." in self.id


class Graph:
    """A rooted node tree plus the dump table its data rows come from."""

    def __init__(self, table, framework: str):
        self.root = Node(ROOT_ID, MODULE)
        self.nodes: Dict[str, Node] = {ROOT_ID: self.root}
        self.table = table
        self.framework = framework
        self.micro_steps = 1
        self.matched_count = 0  # compare mode: nodes matched with the other graph
        self.records = None  # compare mode, NPU side: compare's records behind the precision index
        self.first_suspect: Optional[str] = None  # compare mode, NPU side: the node holding the advisor's suspect

    def preorder(self) -> List[Node]:
        out, todo = [], [self.root]
        while todo:
            node = todo.pop()
            out.append(node)
            todo.extend(reversed(node.children))
        return out

    def dump_data_dir(self) -> Optional[str]:
        if self.table is None:
            return None
        recorded = self.table.header.get("dump_data_dir")
        return recorded if recorded else None


def _node_type(name: str) -> int:
    return MODULE if is_module_name(name) else API


def _backward_parent(name: str, construct: dict, names: set) -> Optional[str]:
    """For a backward node without parent: the backward twin of its forward twin's parent, if any."""
    if ".backward" not in name:
        return None
    twin = name.replace(".backward.", ".forward.") if ".backward." in name else name[:-len("backward")] + "forward"
    parent = construct.get(twin)
    if not isinstance(parent, str) or ".forward." not in parent:
        return None
    candidate = parent.replace(".forward.", ".backward.")
    return candidate if candidate in names else None


def _group_root_apis(graph: Graph) -> None:
    """Wrap runs of two or more consecutive root-level APIs in Apis_Between_Modules.k nodes."""
    grouped, run, count = [], [], 0

    def flush():
        nonlocal count
        if len(run) >= 2:
            collection = Node(f"{COLLECTION_PREFIX}.{count}", API_COLLECTION)
            count += 1
            collection.parent = graph.root
            collection.children = list(run)
            for child in run:
                child.parent = collection
            graph.nodes[collection.id] = collection
            grouped.append(collection)
        else:
            grouped.extend(run)
        run.clear()

    for child in graph.root.children:
        if child.node_type == API:
            run.append(child)
        else:
            flush()
            grouped.append(child)
    flush()
    graph.root.children = grouped


def _split_micro_steps(graph: Graph) -> None:
    step, saw_backward = 0, False
    for child in graph.root.children:
        if child.is_forward_module() and saw_backward:
            step += 1
            saw_backward = False
        elif child.is_backward_module():
            saw_backward = True
        child.micro_step_id = step
    graph.micro_steps = step + 1


def _subtree(node: Node) -> List[Node]:
    out, todo = [], [node]
    while todo:
        node = todo.pop()
        out.append(node)
        todo.extend(node.children)
    return out


def _break_parent_cycles(graph: Graph) -> None:
    """Hang each node that is its own ancestor under the root (else it and its subtree vanish); warn once.

    A node the root does not reach has a parent chain ending in a cycle; the walk up to it crosses only
    nodes that the re-rooted node's subtree then holds, so the whole pass is linear in the node count."""
    reached = {id(node) for node in _subtree(graph.root)}
    cut = []
    for node in list(graph.nodes.values()):
        if id(node) in reached:
            continue
        seen, on_cycle = set(), node
        while id(on_cycle) not in seen:
            seen.add(id(on_cycle))
            on_cycle = on_cycle.parent
        on_cycle.parent.children.remove(on_cycle)
        on_cycle.parent = graph.root
        graph.root.children.append(on_cycle)
        reached.update(id(member) for member in _subtree(on_cycle))
        cut.append(on_cycle.id)
    if cut:
        shown = ", ".join(cut[:5]) + (f" and {len(cut) - 5} more" if len(cut) > 5 else "")
        logger.warning("construct.json: %d node(s) are their own ancestor (parent cycle or self-parent): %s; "
                       "each is shown under the root instead", len(cut), shown)


def _attach_rows(graph: Graph, table) -> None:
    roles, entries = table.columns["role"], table.columns["entry"]
    nodes = graph.nodes
    for index, entry in enumerate(entries):
        node = nodes.get(entry)
        if node is None:
            continue
        role = roles[index]
        if role == "output":
            node.output_rows.append(index)
        elif role in ("input", "parameters"):
            node.input_rows.append(index)


def build_graph(construct: dict, table, stacks: Dict[str, List[str]], complete_stack: bool = False,
                framework: str = "pytorch") -> Graph:
    """The node tree of one dump directory (see the module docstring for the rules)."""
    graph = Graph(table, framework)
    names = set(construct)
    names.update(v for v in construct.values() if isinstance(v, str))
    parents: Dict[str, Optional[str]] = {}
    for name, parent in construct.items():
        if not isinstance(parent, str):
            parent = _backward_parent(name, construct, names)
        parents[name] = parent
    if table is not None:  # entries the construct does not know (L1 dumps) hang under the root
        for entry in table.entries:
            if entry not in parents and entry not in names and not entry.endswith(".parameters_grad"):
                parents[entry] = None
    containers = {p for p in parents.values() if p is not None}
    nodes = graph.nodes

    def node_of(name: str) -> Node:
        node = nodes.get(name)
        if node is None:
            node_type = _node_type(name)
            node = nodes[name] = Node(name, node_type)
        return node

    for name, parent_name in parents.items():
        node = node_of(name)
        parent = node_of(parent_name) if parent_name else graph.root
        if parent_name and parent_name not in parents and parent.parent is None:
            parent.parent = graph.root  # a parent that is never a key (e.g. 'optimizer')
            graph.root.children.append(parent)
        if node.parent is not None:
            continue  # a name listed twice keeps its first parent
        node.parent = parent
        parent.children.append(node)
    for name in containers:  # an unknown parent name is a container, not an API
        if nodes[name].node_type == API and not is_module_name(name):
            nodes[name].node_type = MODULE
    _break_parent_cycles(graph)
    _group_root_apis(graph)
    _split_micro_steps(graph)
    if table is not None:
        _attach_rows(graph, table)
    for order, node in enumerate(graph.preorder()):
        node.order = order
        node.depth = node.parent.depth + 1 if node.parent is not None else 0  # preorder: parent first
        if node.node_type != API_COLLECTION and node is not graph.root:
            node.stack = node_stack(node.id, stacks, is_module_name(node.id), complete_stack)
    return graph
