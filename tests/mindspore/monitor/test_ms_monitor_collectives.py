"""cc_distribution of the MindSpore monitor in a real 2-process msrun job (CPU collectives): the recorded
statistics of all_reduce / all_gather / broadcast, before and after, recomputed from the ranks' own tensors;
the cc_codeline filter; cc_log_only."""
import csv
import glob
import json
import os
import subprocess

import numpy as np
import pytest
from ms_test_helpers import env_with_this_python, msrun_command
from tests.net import free_port

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ms_monitor_msrun_script.py")
OPS = ["min", "max", "norm", "mean"]



def _stats(array):
    return [array.min(), array.max(), np.linalg.norm(array), array.mean()]


def _other_rows(output_dir, rank, step):
    (run,) = glob.glob(os.path.join(output_dir, f"*-rank{rank}-*"))
    with open(os.path.join(run, f"other_{step}-{step}.csv"), encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["param_name", "step"] + OPS
    return {row[0]: [float(v) for v in row[2:]] for row in rows[1:]}


def test_msrun_collectives_recorded_before_and_after(tmp_path):
    with open(SCRIPT, encoding="utf-8") as handle:
        marked = [number for number, line in enumerate(handle, 1) if line.rstrip().endswith("# cc: recorded")]
    assert len(marked) == 3
    config = tmp_path / "monitor.json"
    config.write_text(json.dumps({
        "format": "csv", "ops": OPS, "ndigits": 12,
        "cc_distribution": {"enable": True, "cc_pre_hook": True,
                            "cc_codeline": [f"ms_monitor_msrun_script.py[{n}]" for n in marked]}}))
    log_only = tmp_path / "log_only.json"
    log_only.write_text(json.dumps({"cc_distribution": {"enable": True, "cc_log_only": True}}))
    output_dir = tmp_path / "monitor_output"
    env = env_with_this_python(tmp_path, {**os.environ, "MONITOR_OUTPUT_DIR": str(output_dir)})
    done = subprocess.run(msrun_command("--worker_num=2", "--local_worker_num=2", f"--master_port={free_port()}",
                                        f"--log_dir={tmp_path / 'logs'}", "--join=True", SCRIPT, str(config),
                                        str(log_only), str(tmp_path)),
                          capture_output=True, text=True, timeout=240, env=env)
    logs = "".join(p.read_text() for p in sorted((tmp_path / "logs").glob("worker_*.log")))
    assert done.returncode == 0, logs[-3000:]
    local = [np.load(tmp_path / f"rank{rank}.npz", allow_pickle=False) for rank in (0, 1)]
    for rank in (0, 1):
        for step in (0, 1):
            rows = _other_rows(output_dir, rank, step)
            # the loss all_reduce comes from a line cc_codeline leaves out
            assert sorted(rows) == ["all_gather.0", "all_gather.0.pre", "all_reduce.0", "all_reduce.0.pre",
                                    "all_reduce.1", "all_reduce.1.pre", "broadcast.0", "broadcast.0.pre"]
            for i in (0, 1):
                mine = local[rank][f"step{step}_grad{i}"]
                total = local[0][f"step{step}_grad{i}"] + local[1][f"step{step}_grad{i}"]
                assert rows[f"all_reduce.{i}.pre"] == pytest.approx(_stats(mine), rel=1e-5, abs=1e-9)
                assert rows[f"all_reduce.{i}"] == pytest.approx(_stats(total), rel=1e-5, abs=1e-9)
            # all_gather's first argument is the output list: zeros before, rank 0's (reduced) bias grad after
            assert rows["all_gather.0.pre"] == [0.0, 0.0, 0.0, 0.0]
            bias = local[0][f"step{step}_grad1"] + local[1][f"step{step}_grad1"]
            assert rows["all_gather.0"] == pytest.approx(_stats(bias), rel=1e-5, abs=1e-9)
            assert rows["broadcast.0.pre"] == pytest.approx(_stats(np.full(3, rank + 10.0 * step)))
            assert rows["broadcast.0"] == pytest.approx(_stats(np.full(3, 1 + 10.0 * step)))
    assert logs.count("stopped: monitor: cc_log_only is set") == 2
    assert logs.count("monitor cc: all_reduce from") == 2 and "dtypes ['Float32'], group size 2" in logs
    assert logs.count("restored True") == 2
