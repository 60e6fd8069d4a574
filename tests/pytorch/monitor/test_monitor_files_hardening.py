"""Monitor and grad_probe output files: mode 0640 (folders 0750) whatever the umask, for the csv files from
their first byte, the PNGs, the TensorBoard event files and csv2tb's; a csv cut mid-row by a kill is read
without its cut row by csv2tb and the plots; a hostile direction file is one error line for grad_compare."""
import os
import stat

import numpy as np
import pytest
import torch
from monitor_models import mlp, train_mlp, write_config

from msprobe.core.errors import ParseError
from msprobe.core.monitor.csv2tb import csv2tensorboard_by_step
from msprobe.core.monitor.grad_compare import GradComparator
from msprobe.core.monitor.plots import GLOBAL_PLOT_FILE, HEATMAP_FILE, plot_run
from msprobe.pytorch.monitor import TrainerMon
from msprobe.pytorch.monitor.grad_probe import GradProbe
from msprobe.core.config import parse_config

pytestmark = pytest.mark.usefixtures("monitor_output")


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _monitored_run(tmp_path, steps, **keys):
    cfg = write_config(tmp_path, wg_distribution=True, ops=["norm", "max"], alert={"rules": []}, **keys)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    monitor = TrainerMon(cfg, params_have_main_grad=False).set_monitor(model, optimizer=optimizer)
    train_mlp(model, optimizer, steps)
    monitor.remove()
    return monitor.run_dir


def _grad_probe_run(dump_path, flip=False):
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    def before_step(step, net):
        if flip and step >= 1:
            net[0].weight.grad.mul_(-1)

    config = parse_config({"task": "grad_probe", "dump_path": str(dump_path), "grad_probe": {"grad_level": "L2"}})
    probe = GradProbe(config).monitor(model)
    train_mlp(model, optimizer, 3, before_step=before_step)
    probe.stop()


def _modes(root):
    """{relative path: mode} of everything under root."""
    found = {}
    for directory, folders, files in os.walk(root):
        for name in folders + files:
            path = os.path.join(directory, name)
            found[os.path.relpath(path, root)] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


def _assert_private(root):
    modes = _modes(root)
    assert modes
    wrong = {path: oct(mode) for path, mode in modes.items()
             if mode != (0o750 if os.path.isdir(os.path.join(root, path)) else 0o640)}
    assert wrong == {}
    return modes


def test_monitor_csv2tb_and_grad_compare_files_are_0640_in_0750_folders(tmp_path, monitor_output, umask_022):
    csv_run = _monitored_run(tmp_path, 2, format="csv")
    modes = _assert_private(monitor_output)
    assert any(path.endswith(HEATMAP_FILE) for path in modes) and any(path.endswith(".csv") for path in modes)
    _monitored_run(tmp_path, 2, format="tensorboard")
    assert any("tfevents" in path for path in _assert_private(monitor_output))
    stamp = os.path.basename(csv_run).split("-rank")[0]
    out = csv2tensorboard_by_step(os.path.dirname(csv_run), stamp, stamp, output_dirpath=str(tmp_path / "tb"))
    assert any("tfevents" in path for path in _assert_private(out))
    _grad_probe_run(tmp_path / "a")
    _grad_probe_run(tmp_path / "b", flip=True)
    GradComparator.compare_distributed(str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "compared"))
    assert any(path.endswith("_similarities.png") for path in _assert_private(tmp_path / "compared"))


def _cut_last_row(path):
    """What kill -9 during an append leaves: the last row cut in the middle."""
    with open(path, "rb") as handle:
        data = handle.read()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    cut = last_start + (len(data) - last_start) // 2
    with open(path, "wb") as handle:
        handle.write(data[:cut])
    return data[last_start:].decode().split(",")[0]


def test_csv_cut_mid_row_is_read_without_that_row(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = _monitored_run(tmp_path, 3, format="csv", plots=False, step_count_per_record=3)
    grad_csv = os.path.join(run_dir, "grad_reduced_0-2.csv")
    _cut_last_row(grad_csv)
    _cut_last_row(os.path.join(run_dir, "global_metrics.csv"))
    stamp = os.path.basename(run_dir).split("-rank")[0]
    out = csv2tensorboard_by_step(os.path.dirname(run_dir), stamp, stamp, data_type_list=["grad_reduced"],
                                  output_dirpath=str(tmp_path / "tb"))
    events = EventAccumulator(os.path.join(out, "rank0", "grad_reduced"))
    events.Reload()
    # the cut row is the last parameter's at step 2: its step 2 is missing, the other steps are there
    assert [e.step for e in events.Scalars("vp0:4.bias/norm")] == [0, 1]
    assert [e.step for e in events.Scalars("vp0:0.weight/norm")] == [0, 1, 2]
    written = plot_run(run_dir)
    assert {os.path.basename(path) for path in written} >= {HEATMAP_FILE, GLOBAL_PLOT_FILE}
    assert "incomplete row(s) left out" in capsys.readouterr().out


@pytest.mark.parametrize("content", ["pickle", "huge_shape", "float64"])
def test_hostile_direction_file_is_one_parse_error(tmp_path, content):
    _grad_probe_run(tmp_path / "a")
    _grad_probe_run(tmp_path / "b")
    target = tmp_path / "b" / "rank0" / "step1" / "0.weight.npy"
    if content == "pickle":
        np.save(target, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    elif content == "huge_shape":  # a header claiming 2^40 bools, with no data behind it
        header = np.lib.format.header_data_from_array_1_0(np.zeros(1, dtype=bool))
        header["shape"] = (2 ** 40,)
        with open(target, "wb") as handle:
            np.lib.format.write_array_header_1_0(handle, header)
    else:
        np.save(target, np.zeros((32, 8)))
    with pytest.raises(ParseError, match="0.weight.npy"):
        GradComparator.compare_distributed(str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "o"))
