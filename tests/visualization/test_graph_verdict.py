"""The graph's colours and "first" badge come from compare's dtype-aware judgement and advisor: a clean
bf16-vs-fp32 Llama has no dark node and no badge; a scaled RMSNorm weight is the darkest node, the badge
and compare's suspect, all at once."""
import os
import re

import pytest

from llama_dumps import dump_llama
from test_html_viewer import chromium
from vis_helpers import advisor_suspect, load_vis, node_of_row, precision_indices, run_graph_cli

from msprobe.visualization import graph_verdict

FAULT_NORM = "Module.model.layers.1.post_attention_layernorm.LlamaRMSNorm.forward.0"


@pytest.fixture(scope="module")
def llama_dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("llama")
    return {label: dump_llama(str(root / label), dtype, scale)
            for label, dtype, scale in (("bf16", "bf16", None), ("fp32", "fp32", None), ("faulty", "bf16", 1.05))}


def _ancestors(vis, node_id):
    nodes, chain = vis["NPU"]["node"], []
    while node_id in nodes and nodes[node_id]["upnode"] != "None":
        node_id = nodes[node_id]["upnode"]
        chain.append(node_id)
    return chain


def _first_badges(tmp_path, html):
    dom = chromium(tmp_path, html.as_uri(), "--dump-dom")
    assert 'data-ready="1"' in dom
    return re.findall(r'<li class="rank-item first-bad" data-node="([^"]+)"', dom)


def test_clean_bf16_llama_graph_has_no_dark_node_and_no_badge(tmp_path, llama_dumps):
    npu, bench = llama_dumps["bf16"], llama_dumps["fp32"]
    assert advisor_suspect(npu, bench) is None  # compare finds nothing beyond what bf16 explains
    code, files = run_graph_cli(tmp_path, npu, bench, "--html")
    assert code == 0
    vis = load_vis(files[0])
    indices = precision_indices(vis, collections=True)
    assert len(indices) > 300
    # the old relative-error rule made Min 0 vs 3.8e-10 a 100 % error: dozens of darkest nodes
    dump = load_vis(os.path.join(npu, "dump.json"))["data"]
    assert any(out.get("Min") == 0 for body in dump.values() for out in body.get("output", [])
               if isinstance(out, dict))
    assert max(indices.values()) < 0.2  # every node within the dtype tolerance: the lightest bin
    html = sorted((tmp_path / "out").glob("*.html"))[0]
    assert _first_badges(tmp_path, html) == []
    verdict = graph_verdict(npu, bench)
    assert verdict.worst_node is None and verdict.first_node is None and verdict.suspect is None
    assert verdict.suspect_node is None


def test_faulty_rmsnorm_is_the_worst_node_the_badge_and_the_suspect(tmp_path, llama_dumps):
    npu, bench = llama_dumps["faulty"], llama_dumps["fp32"]
    suspect = advisor_suspect(npu, bench)
    assert suspect is not None
    code, files = run_graph_cli(tmp_path, npu, bench, "--html")
    assert code == 0
    vis = load_vis(files[0])
    suspect_node = node_of_row(vis, suspect)
    assert suspect_node == FAULT_NORM or FAULT_NORM in _ancestors(vis, suspect_node)
    indices = precision_indices(vis)
    assert [k for k, x in indices.items() if x >= 0.8] == [suspect_node]
    # everything before the faulty norm (layer 0, layer 1's attention) stays within tolerance
    order = list(vis["NPU"]["node"])
    before = [k for k in order[:order.index(FAULT_NORM)] if k in indices and ".forward" in k]
    assert len(before) > 20 and max(indices[k] for k in before) < 0.2
    html = sorted((tmp_path / "out").glob("*.html"))[0]
    assert _first_badges(tmp_path, html) == [suspect_node]
    verdict = graph_verdict(npu, bench)
    assert verdict.worst_node == verdict.first_node == verdict.suspect_node == suspect_node
    assert verdict.suspect == suspect
