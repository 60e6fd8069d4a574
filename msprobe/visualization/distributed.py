"""Link communication nodes (`Distributed.*`) across the ranks of one step.

Collectives (all_reduce, broadcast, all_gather, ...) pair with the node of the same name on every
other rank (`send_receive`). Point-to-point calls pair by peer: the k-th `send` from rank a to rank b
with the k-th `recv` on rank b from rank a. Each linked node gets
`matched_distributed = {"communications_type": "send"|"receive"|"send_receive",
"nodes_info": {rank: [precision index text, node id]}}`.
"""
import re
from collections import defaultdict
from typing import Dict, Optional

from msprobe.visualization.graph_model import Graph, Node

__all__ = ["link_ranks"]

_DIST = re.compile(r"^Distributed\.(?P<op>[A-Za-z_]+)\.\d+\.forward$")
_SEND, _RECV = ("send", "isend"), ("recv", "irecv")


def _index_text(node: Node) -> str:
    value = node.data.get("precision_index")
    return "" if value is None else str(value)


def _peer(graph: Graph, node: Node, keyword: str) -> Optional[int]:
    """The peer rank of a p2p call: kwarg `dst`/`src`, else the second positional argument."""
    columns = graph.table.columns
    names = columns["name"]
    positional = None
    for row in node.input_rows:
        name = names[row]
        value = columns["value"][row]
        if name.endswith(f".input.{keyword}"):
            return int(value) if isinstance(value, (int, float)) else None
        if name.endswith(".input.1") and isinstance(value, (int, float)):
            positional = int(value)
    return positional


def link_ranks(graphs: Dict[int, Graph]) -> int:
    """Set matched_distributed on communication nodes of graphs {rank: graph}; returns links made."""
    if len(graphs) < 2:
        return 0
    links = 0
    p2p = defaultdict(list)  # (kind, from rank, to rank) -> nodes in order
    for rank, graph in graphs.items():
        if graph.table is None:
            continue
        for node in graph.preorder():
            match = _DIST.match(node.id)
            if not match:
                continue
            op = match.group("op")
            if op in _SEND:
                peer = _peer(graph, node, "dst")
                if peer is not None:
                    p2p[("send", rank, peer)].append(node)
                continue
            if op in _RECV:
                peer = _peer(graph, node, "src")
                if peer is not None:
                    p2p[("recv", peer, rank)].append(node)
                continue
            info = {str(other): [_index_text(o_node), o_node.id] for other, o_graph in graphs.items()
                    if other != rank and (o_node := o_graph.nodes.get(node.id)) is not None}
            if info:
                node.matched_distributed = {"communications_type": "send_receive", "nodes_info": info}
                links += 1
    for (kind, sender, receiver), nodes in p2p.items():
        if kind != "send":
            continue
        for send_node, recv_node in zip(nodes, p2p.get(("recv", sender, receiver), [])):
            send_node.matched_distributed = {"communications_type": "send",
                                             "nodes_info": {str(receiver): [_index_text(recv_node), recv_node.id]}}
            recv_node.matched_distributed = {"communications_type": "receive",
                                             "nodes_info": {str(sender): [_index_text(send_node), send_node.id]}}
            links += 2
    return links
