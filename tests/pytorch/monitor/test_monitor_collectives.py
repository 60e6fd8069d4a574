"""TrainerMon `cc_distribution` on a real one-rank gloo group: cc_log_only logs and stops with torch.distributed
restored, cc_codeline keeps only the calls of the named line, with values recomputed from the gradients."""
import os

import pytest
import torch
import torch.distributed as dist
from monitor_models import mlp, read_csv, train_mlp, write_config

from msprobe.core.errors import MsprobeError
from msprobe.pytorch.monitor import TrainerMon
from msprobe.pytorch.monitor.collectives import COLLECTIVES


pytestmark = pytest.mark.usefixtures("monitor_output")


@pytest.fixture
def gloo_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _reduce_all(step, net):
    for p in net.parameters():
        dist.all_reduce(p.grad)


def test_cc_log_only_logs_once_and_stops_with_collectives_restored(tmp_path, gloo_group, capsys):
    originals = {api: getattr(dist, api) for api in COLLECTIVES if hasattr(dist, api)}
    cfg = write_config(tmp_path, cc_distribution={"enable": True, "cc_log_only": True}, format="csv")
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    assert dist.all_reduce is not originals["all_reduce"]
    try:
        with pytest.raises(MsprobeError, match="cc_log_only"):
            train_mlp(model, optimizer, 1, before_step=_reduce_all)
        # the stop leaves torch.distributed as it was, without the user calling remove()
        assert {api: getattr(dist, api) for api in originals} == originals
        assert monitor.session is None
    finally:
        monitor.remove()  # no-op after a correct stop; keeps a failure from leaking into other tests
    lines = [line for line in capsys.readouterr().out.splitlines() if "monitor cc:" in line]
    assert len(lines) == 1  # six all_reduce calls, one line
    assert "all_reduce from" in lines[0] and "test_monitor_collectives.py[" in lines[0]
    assert "['torch.float32']" in lines[0] and lines[0].endswith("group size 1")


def test_cc_codeline_keeps_only_the_named_line(tmp_path, gloo_group):
    def before_step(step, net):
        weights = [p for name, p in net.named_parameters() if name.endswith("weight")]
        biases = [p for name, p in net.named_parameters() if name.endswith("bias")]
        for p in biases:
            dist.all_reduce(p.grad)
        for p in weights:
            dist.all_reduce(p.grad)  # WEIGHT-LINE

    with open(__file__, encoding="utf-8") as handle:
        line = next(i for i, text in enumerate(handle, 1) if text.rstrip().endswith("# WEIGHT-LINE"))
    cfg = write_config(tmp_path, cc_distribution={"enable": True, "cc_codeline": [f"test_monitor_collectives.py[{line}]"]},
                       format="csv", ops=["norm"], ndigits=12)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, 1, before_step=before_step)
    monitor.remove()
    header, rows = read_csv(os.path.join(monitor.run_dir, "other_0-0.csv"))
    assert header == ["param_name", "step", "norm"]
    weights = [p for name, p in model.named_parameters() if name.endswith("weight")]
    assert [r[0] for r in rows] == [f"all_reduce.{k}" for k in range(len(weights))]
    for row, weight in zip(rows, weights):
        assert float(row[2]) == pytest.approx(torch.linalg.vector_norm(weight.grad).item(), rel=1e-6)
