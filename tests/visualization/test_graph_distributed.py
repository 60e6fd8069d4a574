"""Multi-rank graphs from a real 2-rank gloo run: one file per rank, `Distributed.*` nodes linked across ranks
(collectives by name, send with its recv)."""
import os
import subprocess
import sys

from tests.net import free_port
from vis_helpers import load_vis, run_graph_cli

HERE = os.path.dirname(os.path.abspath(__file__))


def test_ranks_link_collectives_and_point_to_point(tmp_path):
    out = tmp_path / "dist"
    job = subprocess.run([sys.executable, os.path.join(HERE, "dist_graph_dump.py"), str(out), str(free_port())],
                         capture_output=True, text=True, timeout=180)
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-2000:]
    code, files = run_graph_cli(tmp_path, out, None)  # step0/rank0, step0/rank1
    assert code == 0
    assert [os.path.basename(f).rsplit("_", 1)[0] for f in files] == ["build_step0_rank0", "build_step0_rank1"]
    rank0, rank1 = (load_vis(f)["node"] for f in files)
    reduce = "Distributed.all_reduce.0.forward"
    assert rank0[reduce]["matched_distributed"] == {"communications_type": "send_receive",
                                                    "nodes_info": {"1": ["", reduce]}}
    assert rank1[reduce]["matched_distributed"]["nodes_info"] == {"0": ["", reduce]}
    assert rank0["Distributed.send.0.forward"]["matched_distributed"] == {
        "communications_type": "send", "nodes_info": {"1": ["", "Distributed.recv.0.forward"]}}
    assert rank1["Distributed.recv.0.forward"]["matched_distributed"] == {
        "communications_type": "receive", "nodes_info": {"0": ["", "Distributed.send.0.forward"]}}
    # compare mode: each rank against itself keeps the links and adds precision indices
    code, files = run_graph_cli(tmp_path, out, out, name="cmp")
    npu0 = load_vis(files[0])["NPU"]["node"]
    assert code == 0 and npu0[reduce]["matched_distributed"]["nodes_info"]["1"] == ["0.0", reduce]
