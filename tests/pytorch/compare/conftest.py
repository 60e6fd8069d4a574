"""Real dumps of small models, written once per session with msprobe's PrecisionDebugger."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from compare_models import dump_mlp  # noqa: E402


@pytest.fixture(scope="session")
def dumps(tmp_path_factory):
    """name -> step0 rank directory of a one-step dump."""
    root = tmp_path_factory.mktemp("compare_dumps")
    specs = {
        "stat_fp32": dict(task="statistics"),
        "stat_fp32_again": dict(task="statistics"),
        "stat_bf16": dict(task="statistics", dtype="bf16"),
        "stat_broken": dict(task="statistics", broken=True),
        "stat_nan": dict(task="statistics", nan_input=True),
        "tensor_fp32": dict(task="tensor"),
        "tensor_seed2": dict(task="tensor", seed=4321),
        "tensor_broken": dict(task="tensor", broken=True),
        "md5_fp32": dict(task="statistics", level="L1", summary_mode="md5"),
        "md5_seed2": dict(task="statistics", level="L1", summary_mode="md5", seed=4321),
    }
    return {name: dump_mlp(str(root / name), **spec) for name, spec in specs.items()}


@pytest.fixture(scope="session")
def dist_dumps(tmp_path_factory):
    """(npu step dir, bench step dir) of two 2-rank gloo runs with different seeds."""
    root = tmp_path_factory.mktemp("dist")
    jobs = [subprocess.Popen([sys.executable, os.path.join(HERE, "dist_dump.py"), str(root / side), seed, port],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for side, seed, port in (("npu", "1", "29531"), ("bench", "2", "29537"))]
    for job in jobs:
        output = job.communicate(timeout=120)[0]
        assert job.returncode == 0, output.decode()[-2000:]
    return str(root / "npu" / "step0"), str(root / "bench" / "step0")
