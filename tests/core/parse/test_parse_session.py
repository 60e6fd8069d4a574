"""`msprobe -f pytorch parse` driven through stdin and through a pseudo-terminal, on real dumps."""
import csv
import glob
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

MSPROBE = [sys.executable, "-m", "msprobe.cli"]


def _dump(root, seed):
    """A tensor-mode L1 dump of a small model made with msprobe's own PrecisionDebugger."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    config = os.path.join(root, f"config_{seed}.json")
    with open(config, "w") as handle:
        json.dump({"task": "tensor", "dump_path": os.path.join(root, f"dump_{seed}"), "level": "L1"}, handle)
    debugger = PrecisionDebugger(config_path=config)
    debugger.start(model=model)
    torch.manual_seed(100)  # the same input for both dumps
    model(torch.randn(2, 4)).sum().backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return os.path.join(root, f"dump_{seed}", "step0", "rank")


@pytest.fixture(scope="module")
def torch_dumps(tmp_path_factory):
    """(dump dir of seed 0, dump dir of seed 1): each with dump.json, stack.json, dump_tensor_data/*.pt."""
    root = str(tmp_path_factory.mktemp("parse_dumps"))
    return _dump(root, 0), _dump(root, 1)


def _session(lines, framework="pytorch", cwd=None):
    script = "".join(line + "\n" for line in lines)
    done = subprocess.run(MSPROBE + ["-f", framework, "parse"], input=script, capture_output=True, text=True,
                          timeout=60, cwd=cwd)
    return done.returncode, done.stdout + done.stderr


def _tensor(dump, name):
    return os.path.join(dump, "dump_tensor_data", name)


def test_every_command_through_stdin(torch_dumps, tmp_path):
    dump, other = torch_dumps
    out_pt = _tensor(dump, "Functional.linear.0.forward.output.0.pt")
    out_other = _tensor(other, "Functional.linear.0.forward.output.0.pt")
    marker = tmp_path / "made_by_run"
    code, text = _session([
        f"pt -n {out_pt}",
        f"cn -m {out_pt} -g {out_other} -p 3 -al 0.01 -rl 0.01 -s",
        f"pk -f {os.path.join(dump, 'dump.json')} -n Functional_linear_0",  # both directions
        f"vc -m {os.path.join(dump, 'dump_tensor_data')} -g {os.path.join(other, 'dump_tensor_data')} -out {tmp_path}",
        f"touch {marker}",  # not a command: must not run
        "dc -n kernel_dump",
        "cad -m kernel_dump",
        f"run touch {marker}",
    ], cwd=str(tmp_path))
    assert code == 0 and "Traceback" not in text
    mine = torch.load(out_pt, weights_only=True).numpy()
    golden = torch.load(out_other, weights_only=True).numpy()
    assert f"[Shape: (2, 3)] [Dtype: float32] [Max: {mine.max():.8g}] [Min: {mine.min():.8g}]" in text
    assert os.path.isfile(out_pt + ".txt") and os.path.isfile(out_other + ".txt")  # pt and cn -s
    np.testing.assert_allclose(np.loadtxt(out_pt + ".txt"), mine.reshape(-1), rtol=1e-7)
    errors = np.abs(mine - golden) > 0.01 + 0.01 * np.abs(golden)
    assert f"ErrorPer: {errors.mean():.8g}  (rl= 0.01, al= 0.01)" in text
    cosine = float((mine * golden).sum() / np.linalg.norm(mine) / np.linalg.norm(golden))
    reported = float(text.split("CosSim:")[1].split()[0])
    assert reported == pytest.approx(cosine, rel=1e-6)
    assert f"[Functional.linear.0.forward.output.0][dtype: torch.float32][shape: [2, 3]][max: {mine.max()}" in text
    assert "Functional.linear.0.backward" in text and "Stack:" in text
    (csv_path,) = glob.glob(str(tmp_path / "batch_compare_*.csv"))
    with open(csv_path) as handle:
        rows = {row["NPU File Name"]: row for row in csv.DictReader(handle)}
    row = rows["Functional.linear.0.forward.output.0.pt"]
    assert float(row["Max Abs Error"]) == pytest.approx(np.abs(mine - golden).max())
    assert row["Md5 Consistency"] == "False"
    assert rows["Functional.linear.0.forward.input.0.pt"]["Md5 Consistency"] == "True"  # the same input
    assert "unknown command 'touch'" in text
    assert text.count("msaccucmp") >= 2
    assert marker.exists()  # only through `run`


def test_help_and_option_errors_keep_the_session_open(tmp_path):
    code, text = _session(["cn -h", "cn -m only_one.npy", "pt -n", "pt -n missing.npy", "pk -f x", "help pk",
                           "cn -m a -g b -p -1", "help"])
    assert code == 0 and "Traceback" not in text
    assert "usage: cn [-h] -m MY_DATA -g GOLDEN" in text
    assert "cn: error: the following arguments are required: -g/--golden" in text
    assert "pt: error: argument -n/--name: expected one argument" in text
    assert "[ERROR] tensor file 'missing.npy' does not exist." in text
    assert "pk: error: the following arguments are required: -n/--name" in text
    assert text.count("Parse >>> ") == 9  # one prompt per line plus the one that met the end of input
    for command in ("pt", "cn", "pk", "vc", "dc", "cad", "run", "exit"):
        assert f"| {command} " in text


def test_end_of_input_exits_with_status_zero(tmp_path):
    for framework in ("pytorch", "mindspore"):
        started = time.monotonic()
        with open(os.devnull) as devnull:
            done = subprocess.run(MSPROBE + ["-f", framework, "parse"], stdin=devnull, capture_output=True,
                                  text=True, timeout=60)
        assert done.returncode == 0 and len(done.stdout) < 300, done.stdout[-300:]
        assert time.monotonic() - started < 30


def _read_until(fd, token, timeout=30.0):
    data, deadline = b"", time.monotonic() + timeout
    while token not in data:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError(f"no {token!r} in time; got {data[-500:]!r}")
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        data += chunk
    return data


def _spawn_on_terminal():
    pid, fd = pty.fork()
    if pid == 0:  # the child: msprobe on the terminal
        os.execv(sys.executable, MSPROBE + ["-f", "pytorch", "parse"])
    return pid, fd


def _exit_status(pid, fd, timeout=30.0):
    """The child's exit code; its terminal output is drained meanwhile; killed (and None) after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        if select.select([fd], [], [], 0.1)[0]:
            try:
                os.read(fd, 4096)
            except OSError:
                pass
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


@pytest.mark.timeout(120)
def test_pseudo_terminal_session_ctrl_d(torch_dumps):
    dump, _ = torch_dumps
    pid, fd = _spawn_on_terminal()
    try:
        _read_until(fd, b"Parse >>> ")
        os.write(fd, f"pk -f {os.path.join(dump, 'dump.json')} -n Functional.relu.0.forward\r".encode())
        shown = _read_until(fd, b"Parse >>> ")
        assert b"[Functional.relu.0.forward.output.0][dtype: torch.float32]" in shown
        os.write(fd, b"cn -m a.npy\r")
        assert b"required: -g/--golden" in _read_until(fd, b"Parse >>> ")
        os.write(fd, b"\x04")  # Ctrl+D at an empty prompt
        assert _exit_status(pid, fd) == 0
    finally:
        os.close(fd)


@pytest.mark.timeout(120)
def test_pseudo_terminal_ctrl_c_leaves_cleanly():
    pid, fd = _spawn_on_terminal()
    try:
        _read_until(fd, b"Parse >>> ")
        time.sleep(0.2)  # let readline take the terminal
        os.write(fd, b"\x03")
        assert _exit_status(pid, fd) == 0
    finally:
        os.close(fd)


def test_tables_are_styled_on_a_terminal_and_plain_ascii_to_a_pipe():
    import io

    from msprobe.core.parse.shell import ParseShell

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream, styled in ((io.StringIO(), False), (Terminal(), True)):
        ParseShell(stdin=io.StringIO(), stdout=stream).onecmd("help")
        text = stream.getvalue()
        assert ("\x1b[" in text) is styled
        assert ("+---" in text) is not styled and "pt" in text and "what it does" in text


def test_pt_shows_bfloat16_for_a_bf16_tensor_msprobe_dumped(tmp_path):
    # msprobe's dump writes .pt files in torch's legacy (non-zip) layout; parse read its bf16 files as
    # float32 (the widened values) and said so
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).bfloat16()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "tensor", "dump_path": str(tmp_path / "dump"), "level": "L1"}))
    debugger = PrecisionDebugger(config_path=str(config))
    debugger.start(model=model)
    out = model(torch.randn(2, 4).bfloat16())
    debugger.stop()
    debugger.step()
    debugger.close()
    path = _tensor(str(tmp_path / "dump" / "step0" / "rank"), "Functional.linear.0.forward.output.0.pt")
    with open(path, "rb") as handle:
        assert handle.read(2) != b"PK"  # the legacy layout, not a zip archive
    code, text = _session([f"pt -n {path}", "exit"])
    assert code == 0 and "[Dtype: bfloat16]" in text and "float32" not in text
    assert f"[Max: {out.float().max().item():.8g}]" in text
