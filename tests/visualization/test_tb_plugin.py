"""Our `.vis` files load in the real tb-graph-ascend plugin: TensorBoard on a free loopback port, the
plugin's routes walked in the order its page uses them."""
import os
import shutil

from tb_client import TensorBoard
from vis_helpers import advisor_suspect, load_vis, node_of_row, rank_dir, run_graph_cli


def test_plugin_serves_build_and_compare_graphs(tmp_path, pt_dumps):
    good, bad = rank_dir(pt_dumps[("statistics", "good")]), rank_dir(pt_dumps[("statistics", "bad")])
    _, compare_files = run_graph_cli(tmp_path, bad, good, name="cmp")
    _, build_files = run_graph_cli(tmp_path, good, name="bld")
    logdir = tmp_path / "logdir"
    # colours are per run (read from a run's first file), so the build graph gets a run of its own
    for run, paths in (("compare", compare_files), ("build", build_files)):
        os.makedirs(logdir / run, mode=0o750)
        for path in paths:
            shutil.copy(path, logdir / run)
    compare_tag = os.path.basename(compare_files[0])[:-4]
    build_tag = os.path.basename(build_files[0])[:-4]
    vis = load_vis(compare_files[0])
    with TensorBoard(logdir) as board:
        meta = board.get("load_meta_dir")
        assert meta["data"]["compare"]["tags"] == [compare_tag] and meta["data"]["build"]["tags"] == [build_tag]
        for run, tag, single in (("compare", compare_tag, False), ("build", build_tag, True)):
            events = board.stream(f"loadGraphData?run={run}&tag={tag}&type=json")
            assert events[-1].get("done") is True, events[-1]
            meta_data = {"run": run, "tag": tag, "type": "json", "lang": "en", "microStep": -1}
            config = board.post("loadGraphConfigInfo", {"metaData": meta_data})
            assert config["success"] and config["data"]["isSingleGraph"] is single
            assert config["data"]["microSteps"] == 1
            node_list = board.post("loadGraphAllNodeList", {"metaData": meta_data})["data"]
            node_type = "Single" if single else "NPU"
            expanded = board.post("changeNodeExpandState",
                                  {"metaData": meta_data, "nodeInfo": {"nodeName": "root", "nodeType": node_type}})
            assert expanded["success"] and "DefaultModel" in expanded["data"]
            if single:
                assert len(node_list["npuNodeList"]) == len(load_vis(build_files[0])["node"])
                continue
            assert len(node_list["npuNodeList"]) == len(vis["NPU"]["node"]) and not node_list["npuUnMatchNodes"]
            assert set(config["data"]["colors"]) == set(vis["Colors"])
            layout = expanded["data"]
            blocks = "Module.blocks.Sequential.forward.0"
            assert layout[blocks]["precisionIndex"] == vis["NPU"]["node"][blocks]["data"]["precision_index"]
            fault = "Module.blocks.2.0.Linear.forward.0"
            info = board.post("getNodeInfo", {"metaData": meta_data, "nodeInfo": {"nodeName": fault, "nodeType": "NPU"}})
            output = info["data"]["npu"]["output_data"][fault + ".output.0"]
            assert output["MaxRelativeErr"] == vis["NPU"]["node"][fault]["output_data"][fault + ".output.0"][
                "MaxRelativeErr"]
            assert info["data"]["bench"]["id"] == fault
            # the plugin screens API nodes: the darkest bin holds the advisor's suspect alone (when it is
            # an API); its consequences downstream are in the middle bin, calls before it in the lightest
            suspect = node_of_row(vis, advisor_suspect(bad, good))
            worst = board.post("screen", {"metaData": meta_data, "type": "precision", "values": [[0.8, 1.01]]})
            assert worst["data"] == ([suspect] if vis["NPU"]["node"][suspect]["node_type"] == 1 else [])
            middle = board.post("screen", {"metaData": meta_data, "type": "precision", "values": [[0.4, 0.6]]})
            assert "Functional.linear.4.forward" in middle["data"]
            lightest = board.post("screen", {"metaData": meta_data, "type": "precision", "values": [[0, 0.2]]})
            assert "Functional.linear.1.forward" in lightest["data"]
            assert "Functional.linear.1.forward" not in middle["data"]
