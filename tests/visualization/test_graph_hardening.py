"""Graph inputs that used to blow up or vanish: deep parent chains (the .vis must grow linearly with depth),
parent cycles and self-parents (warned about and kept), and stack lines holding HTML comment openers."""
import json
import os
import shutil

from test_html_viewer import chromium
from vis_helpers import load_vis, rank_dir, run_graph_cli

_STAT = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
         "Norm": 1.0, "requires_grad": False}


def _write_dump(directory, construct):
    """A statistics dump.json with one input and one output per construct key, next to that construct.json."""
    os.makedirs(directory, exist_ok=True)
    data = {name: {"input_args": [_STAT], "input_kwargs": {}, "output": [_STAT]} for name in construct}
    with open(os.path.join(directory, "construct.json"), "w") as handle:
        json.dump(construct, handle)
    with open(os.path.join(directory, "dump.json"), "w") as handle:
        json.dump({"task": "statistics", "level": "L0", "framework": "pytorch", "dump_data_dir": None,
                   "data": data}, handle)
    with open(os.path.join(directory, "stack.json"), "w") as handle:
        json.dump({}, handle)
    return directory


def _chain(depth):
    names = [f"Module.m{i}.Linear.forward.0" for i in range(depth)]
    return {name: (names[i - 1] if i else None) for i, name in enumerate(names)}


def _compare_vis_size(tmp_path, depth):
    construct = _chain(depth)
    npu = _write_dump(str(tmp_path / f"npu{depth}"), construct)
    bench = _write_dump(str(tmp_path / f"bench{depth}"), construct)
    code, vis = run_graph_cli(tmp_path, npu, bench, name=f"out{depth}")
    assert code == 0 and len(vis) == 1
    return vis[0], os.path.getsize(vis[0])


def test_compare_vis_grows_linearly_with_chain_depth(tmp_path):
    # every node matched: whole ancestor chains per node made 2,000 -> 8,000 grow the file 16x (2 GB at 8,000)
    _, small = _compare_vis_size(tmp_path, 2000)
    vis, large = _compare_vis_size(tmp_path, 8000)
    assert large < 4.5 * small, (small, large)
    nodes = load_vis(vis)["NPU"]["node"]
    deepest = "Module.m7999.Linear.forward.0"
    assert nodes[deepest]["matched_node_link"] == [deepest]  # too deep for the whole chain: the id alone
    assert nodes[deepest]["upnode"] == "Module.m7998.Linear.forward.0"
    shallow = "Module.m2.Linear.forward.0"  # shallow nodes keep 1.2.1's full chain
    assert nodes[shallow]["matched_node_link"] == ["DefaultModel", "Module.m0.Linear.forward.0",
                                                   "Module.m1.Linear.forward.0", shallow]
    assert all(node["matched_node_link"] for node in nodes.values())


def test_parent_cycles_and_self_parents_are_kept_under_the_root_with_a_warning(tmp_path, capsys):
    a, b, c = "Module.a.Linear.forward.0", "Module.b.Linear.forward.0", "Module.c.Linear.forward.0"
    child, ok = "Functional.linear.0.forward", "Module.ok.Linear.forward.0"
    construct = {a: b, b: a, c: c, child: a, ok: None}
    code, vis = run_graph_cli(tmp_path, _write_dump(str(tmp_path / "dump"), construct))
    assert code == 0 and len(vis) == 1
    nodes = load_vis(vis[0])["node"]
    assert set(construct) <= set(nodes)  # nothing vanished
    reachable, todo = set(), ["DefaultModel"]
    while todo:
        name = todo.pop()
        reachable.add(name)
        todo.extend(nodes[name]["subnodes"])
    assert reachable == set(nodes)
    assert nodes[c]["upnode"] == "DefaultModel" and c not in nodes[c]["subnodes"]
    assert nodes[child]["upnode"] == a
    assert {nodes[a]["upnode"], nodes[b]["upnode"]} == {"DefaultModel", a}  # cycle cut once, under the root
    warnings = [line for line in capsys.readouterr().out.splitlines() if "own ancestor" in line]
    assert len(warnings) == 1 and "2 node(s)" in warnings[0] and c in warnings[0], warnings


def test_stack_line_with_an_html_comment_opener_still_renders(tmp_path, pt_dumps):
    source = rank_dir(pt_dumps[("statistics", "good")])
    directory = tmp_path / "dump"
    shutil.copytree(source, directory)
    stacks = json.loads((directory / "stack.json").read_text())
    node = "Module.blocks.2.0.Linear.forward.0"
    hostile = "File x.py, line 1, in f, \n s = '<!-- <script>alert(1)</script>'"
    stacks[node] = [hostile] + list(stacks.get(node, []))
    (directory / "stack.json").write_text(json.dumps(stacks))
    code, _ = run_graph_cli(tmp_path, directory, None, "--html", name="out")
    html = sorted((tmp_path / "out").glob("*.html"))
    assert code == 0 and len(html) == 1
    assert "<!--" not in html[0].read_text().split('id="vis-data">', 1)[1].split("</script>", 1)[0]
    dom = chromium(tmp_path, html[0].as_uri() + "#select=" + node, "--dump-dom")
    assert 'data-ready="1"' in dom
    panel = dom[dom.index('id="panel"'):]
    assert "&lt;!-- &lt;script&gt;alert(1)&lt;/script&gt;" in panel  # shown as text, not parsed as markup
