"""Replayed PyTorch calls read and write tensors only, and numbers among their arguments cannot make gigabytes.

Issue 41: `Aten.from_file` was allow-listed (every registered ATen op was), so one dump.json entry made run_ut
create or grow any file the user could write; `Torch.full([20000, 20000], 1.0)` in 387 bytes of dump.json
peaked at 13.5 GB. Every replay path (run_ut, multi_run_ut, op_generate and its scripts, run_overflow_check,
the online bench, online_dispatch) now refuses an operator by its schema and sizes each call on the meta
device first (msprobe.pytorch.api_accuracy_checker.replay_guard). Memory is measured per child process by a small
launcher (`LAUNCHER`) that starts it and reads its ru_maxrss: a child forked straight from this test process would
count the pytest process's own resident set (Linux keeps the pre-exec high-water mark), which is past 1 GiB late in
a full run. The children run under an address-space limit so that a regression fails the test instead of the
machine.
"""
import csv
import glob
import json
import os
import subprocess
import sys
import time

import pytest
import torch

from msprobe.core.api_resolver import ApiNameRefused
from msprobe.core.errors import MsprobeError
from msprobe.pytorch.api_accuracy_checker.replay_guard import (MAX_MADE_ELEMENTS, ReplayRefused, check_replayed_call,
                                                               effect_refusal)
from tests.net import free_port
from tests.security.online_bench import running_bench, send_calls

ENV = dict(os.environ, MSPROBE_NO_PROGRESS="1", OMP_NUM_THREADS="1")
TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 1.0, "Min": -1.0,
          "Mean": 0.0, "Norm": 1.0, "requires_grad": False}
ONE = dict(TENSOR, shape=[1, 1])
GIB = 1 << 30
ADDRESS_LIMIT = 8 * GIB  # a regression dies at this, never the shared machine (MindSpore maps ~5 GiB)


def _int(value):
    return {"type": "int", "value": value}


def _ints(*values):
    return [_int(v) for v in values]


def _from_file(path, size):
    return [{"type": "str", "value": str(path)}, {"type": "bool", "value": True}, _int(size)]


# -- catalogues: calls whose effect is outside tensors, and sizes given as numbers ---------------------
# (name, input_args, input_kwargs) of calls that make a tensor over the offline cap (2^28 elements) from numbers
OVERSIZED = [
    ("Torch.full", [_ints(20000, 20000), {"type": "float", "value": 1.0}], {}),
    ("Torch.full", [{"type": "torch.Size", "value": [20000, 20000]}, {"type": "float", "value": 0.5}], {}),
    ("Torch.linspace", [{"type": "float", "value": 0.0}, {"type": "float", "value": 1.0}, _int(400_000_000)], {}),
    ("Torch.tril_indices", _ints(30000, 30000), {}),
    ("Torch.arange", [{"type": "float", "value": 4e8}], {}),
    ("Torch.eye", _ints(20000), {}),
    ("Tensor.repeat", [TENSOR, _int(10000), _int(10000)], {}),
    ("Tensor.tile", [TENSOR, _ints(10000, 10000)], {}),
    ("Aten.expand", [ONE, _ints(20000, 20000)], {}),
    ("Functional.pad", [TENSOR, _ints(0, 20000, 0, 20000)], {}),
    ("Aten.full", [_ints(20000, 20000), {"type": "float", "value": 1.0}], {}),
    ("Aten.ones.default", [_ints(20000, 20000)], {}),
    ("Aten.new_zeros", [TENSOR, _ints(20000, 20000)], {}),
]
# the same APIs at honest sizes, plus calls whose size depends on their data but is bounded by their inputs
HONEST = [
    ("Torch.full", [_ints(2, 3), {"type": "float", "value": 1.0}], {}),
    ("Torch.arange", [{"type": "float", "value": 10.0}], {}),
    ("Torch.eye", _ints(4), {}),
    ("Tensor.repeat", [TENSOR, _int(2), _int(2)], {}),
    ("Functional.pad", [TENSOR, _ints(1, 1, 1, 1)], {}),
    ("Torch.nonzero", [TENSOR], {}),
    ("Tensor.__getitem__", [TENSOR, dict(TENSOR, dtype="torch.bool", Max=True, Min=False, Mean=None, Norm=None)], {}),
    ("Torch.masked_select", [TENSOR, dict(TENSOR, dtype="torch.bool", Max=True, Min=False, Mean=None, Norm=None)], {}),
    ("Functional.linear", [dict(TENSOR, shape=[4, 3]), dict(TENSOR, shape=[5, 3])], {}),
    ("Tensor.reshape", [TENSOR, _int(3), _int(2)], {}),
    ("Torch.tril_indices", _ints(30, 30), {}),
    ("Torch.full", [_ints(2, 3), {"type": "float", "value": 1.0}], {"dtype": {"type": "torch.dtype", "value": "torch.float64"},
                                                                    "device": {"type": "torch.device", "value": "cpu"}}),
]
# operators whose schema has an effect outside tensors, and why
EFFECT_OPS = [
    (torch.ops.aten.from_file, "'filename' is a file name or path"),
    (torch.ops.aten.from_file.default, "'filename' is a file name or path"),
    (torch.ops.aten.record_stream.default, "Stream"),
    (torch.ops.aten.set_.source_Storage, "Storage"),
    (torch.ops.aten._print.default, "returns nothing and writes no tensor"),
    (torch.ops.aten._cufft_set_plan_cache_max_size.default, "returns nothing and writes no tensor"),
    (torch.ops.aten.normal.Tensor_float, "Generator"),
]


def _dump(folder, entries, task="statistics", output=None):
    data = {f"{name}.{index}.forward": {"input_args": args, "input_kwargs": kwargs, "output": output or [TENSOR]}
            for index, (name, args, kwargs) in enumerate(entries)}
    path = folder / "dump.json"
    path.write_text(json.dumps({"task": task, "level": "L1", "framework": "pytorch", "data": data}))
    return path


# python -c LAUNCHER PEAK_FILE ADDRESS_LIMIT ARGV...: runs ARGV under the address-space limit with this small process as
# its parent, writes ARGV's peak resident set in bytes to PEAK_FILE, exits with ARGV's code; SIGTERM is passed on
LAUNCHER = """
import resource, signal, subprocess, sys
peak_file, limit, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
child = subprocess.Popen(argv)
signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
code = child.wait()
with open(peak_file, "w") as handle:
    handle.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))
sys.exit(code)
"""


def launched(argv, peak_file):
    """The command that runs `python argv` under LAUNCHER (its peak written to peak_file)."""
    return [sys.executable, "-c", LAUNCHER, str(peak_file), str(ADDRESS_LIMIT), sys.executable, *argv]


def _measured(argv, folder, timeout=400):
    """(exit code, output, peak RSS in bytes) of `python argv` run alone, under the address limit."""
    stamp = time.monotonic_ns()
    log, peak = folder / f"log_{stamp}.txt", folder / f"peak_{stamp}.txt"
    with open(log, "w", encoding="utf-8") as handle:
        try:
            code = subprocess.run(launched(argv, peak), stdout=handle, stderr=subprocess.STDOUT, env=ENV,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            pytest.fail(f"{argv} ran past {timeout} s")
    return code, log.read_text(encoding="utf-8"), int(peak.read_text())


def _rows(out_dir, suffix=""):
    path, = glob.glob(os.path.join(str(out_dir), f"accuracy_checking_result_*[0-9]{suffix}.csv"))
    with open(path, newline="", encoding="utf-8") as handle:
        return {row[0]: row for row in list(csv.reader(handle))[1:]}


# -- the schema rule ---------------------------------------------------------------------------------
@pytest.mark.parametrize("op, reason", EFFECT_OPS, ids=[str(op) for op, _ in EFFECT_OPS])
def test_operators_with_effects_outside_tensors_are_refused_by_their_schema(op, reason):
    assert reason in effect_refusal(op)


def test_tensor_only_operators_and_mixed_packets_pass_the_schema_rule():
    for op in (torch.ops.aten.add.Tensor, torch.ops.aten.addmm, torch.ops.aten.add_.Tensor, torch.ops.aten.div.Tensor_mode,
               torch.ops.aten.full.default, torch.ops.aten.to.device, torch.ops.aten.set_):  # set_: Tensor overloads too
        assert effect_refusal(op) == "", op
    # the packet passes by name; the Storage overload is still refused when the call is sized
    storage_args = (torch.ones(3), torch.ones(3).untyped_storage())
    with pytest.raises(ReplayRefused, match="UntypedStorage, not a tensor"):
        check_replayed_call(torch.ops.aten.set_, storage_args, {})


def test_from_file_resolves_nowhere_in_run_ut_op_generate_or_online_dispatch(tmp_path):
    from msprobe.pytorch.api_accuracy_checker.op_resolver import resolve_api
    from msprobe.pytorch.online_dispatch.op_call import resolve_op

    for api in ("from_file", "from_file.default", "_print", "record_stream"):
        with pytest.raises(ApiNameRefused, match="refused"):
            resolve_api("Aten", api, warn=False)
    for qualified in ("aten::from_file", "aten::_print", "aten::record_stream", "aten::set_.source_Storage"):
        with pytest.raises(ApiNameRefused, match="outside tensors|handle|file name"):
            resolve_op(qualified)
    assert resolve_op("aten::set_.source_Tensor") is torch.ops.aten.set_.source_Tensor


def test_run_ut_on_a_from_file_dump_creates_and_grows_no_file(tmp_path):
    """The issue's entry: `Aten.from_file` with (PATH, shared=True, N) created PATH and grew 'keep me' with NULs."""
    kept = tmp_path / "kept.txt"
    kept.write_bytes(b"keep me\n")
    created = tmp_path / "created.bin"
    dump = _dump(tmp_path, [("Aten.from_file", _from_file(created, 1000), {}),
                            ("Aten.from_file.default", _from_file(kept, 1000), {}),
                            ("Torch.exp", [TENSOR], {})])
    for command in ("run_ut", "multi_run_ut"):
        out = tmp_path / command
        code, log, _ = _measured(["-m", "msprobe.cli", "-f", "pytorch", command, "-api_info", str(dump),
                                  "-o", str(out)] + (["-n", "2"] if command == "multi_run_ut" else []), tmp_path)
        assert code == 0 and "Traceback" not in log, log
        assert not created.exists() and kept.read_bytes() == b"keep me\n", log
        rows = _rows(out)
        for name in ("Aten.from_file.0", "Aten.from_file.default.1"):
            assert rows[name][1] == "SKIP" and "file name or path" in rows[name][3], rows[name]
        assert rows["Torch.exp.2"][1] == "pass"


def test_op_generate_refuses_from_file_and_writes_no_script(tmp_path):
    target = tmp_path / "created.bin"
    extracted = tmp_path / "extracted.json"
    extracted.write_text(json.dumps({"task": "statistics", "data": {"Aten.from_file.0.forward": {
        "input_args": _from_file(target, 1000), "input_kwargs": {}, "output": [TENSOR]}}}))
    config = tmp_path / "config_op.json"
    config.write_text(json.dumps({"extract_api_path": str(extracted)}))
    code, log, _ = _measured(["-m", "msprobe.cli", "-f", "pytorch", "op_generate", "-i", str(config),
                              "-o", str(tmp_path / "ops")], tmp_path)
    errors = [line for line in log.splitlines() if line.startswith("[ERROR]")]
    assert code == 1 and len(errors) == 1 and "file name or path" in errors[0], log
    assert not (tmp_path / "ops").exists() and not target.exists()


def test_run_overflow_check_refuses_from_file_and_oversized_calls(tmp_path):
    created = tmp_path / "created.bin"
    overflowing = [dict(TENSOR, Max=float("inf"))]
    dump = _dump(tmp_path, [("Aten.from_file", _from_file(created, 1000), {}), OVERSIZED[0]],
                 task="overflow_check", output=overflowing)
    code, log, peak = _measured(["-m", "msprobe.cli", "-f", "pytorch", "run_overflow_check", "-api_info", str(dump),
                                 "-o", str(tmp_path / "out")], tmp_path)
    assert code == 0 and "Traceback" not in log, log
    assert not created.exists()
    report, = glob.glob(str(tmp_path / "out" / "run_overflow_check_result_*.csv"))
    with open(report, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))[1:]
    assert len(rows) == 2 and all("skipped" in row for row in rows), rows
    assert any("file name or path" in cell for cell in rows[0]) and any("over the cap" in cell for cell in rows[1])
    assert peak < GIB, peak


# -- sizes given as numbers --------------------------------------------------------------------------
def test_run_ut_refuses_every_oversized_call_before_it_runs_and_stays_under_a_gib(tmp_path):
    dump = _dump(tmp_path, OVERSIZED)
    assert len(json.dumps({"data": {"Torch.full.0.forward": {"input_args": OVERSIZED[0][1]}}})) < 400
    code, log, peak = _measured(["-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-api_info", str(dump),
                                 "-o", str(tmp_path / "out")], tmp_path)
    assert code == 0 and "Traceback" not in log, log
    rows = _rows(tmp_path / "out")
    for index, (name, _, _) in enumerate(OVERSIZED):
        row = rows[f"{name}.{index}"]
        assert row[1] == "SKIP" and "over the cap" in row[3] and "nothing was run" in row[3], row
    assert peak < GIB, f"peak {peak / GIB:.2f} GiB"


def test_honest_sizes_and_data_dependent_calls_still_run_and_pass(tmp_path):
    dump = _dump(tmp_path, HONEST)
    code, log, _ = _measured(["-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-api_info", str(dump),
                              "-o", str(tmp_path / "out")], tmp_path)
    assert code == 0, log
    rows = _rows(tmp_path / "out")
    for index, (name, _, _) in enumerate(HONEST):
        assert rows[f"{name}.{index}"][1] == "pass", rows[f"{name}.{index}"]


def test_the_cap_follows_the_largest_tensor_argument_not_the_numbers():
    big = torch.empty(MAX_MADE_ELEMENTS + 2, device="meta")  # an input the dump may hold (up to 2^30 elements)
    check_replayed_call(torch.relu, (big,), {})  # as large as its input: allowed
    with pytest.raises(ReplayRefused, match="over the cap"):
        check_replayed_call(torch.Tensor.repeat, (big, 2), {})
    with pytest.raises(ReplayRefused, match="over the cap"):
        check_replayed_call(torch.full, ([4097, 4096], 1.0), {}, cap=1 << 24)
    with pytest.raises(ReplayRefused, match="cannot be sized"):  # output size is a value of its input
        check_replayed_call(torch.bincount, (torch.tensor([10 ** 9]),), {})


def test_op_generate_script_of_an_oversized_call_refuses_it_when_run(tmp_path):
    extracted = tmp_path / "extracted.json"
    name, args, kwargs = OVERSIZED[0]
    extracted.write_text(json.dumps({"task": "statistics", "data": {f"{name}.0.forward": {
        "input_args": args, "input_kwargs": kwargs, "output": [TENSOR]}}}))
    config = tmp_path / "config_op.json"
    config.write_text(json.dumps({"extract_api_path": str(extracted)}))
    code, log, _ = _measured(["-m", "msprobe.cli", "-f", "pytorch", "op_generate", "-i", str(config),
                              "-o", str(tmp_path / "ops")], tmp_path)
    assert code == 0, log
    script, = glob.glob(str(tmp_path / "ops" / "*.py"))
    code, log, peak = _measured([script], tmp_path)
    assert code == 1 and "over the cap" in log and "Traceback" not in log, log
    assert peak < GIB, peak


def test_the_online_bench_refuses_from_file_and_oversized_calls_it_receives(tmp_path):
    """The issue: one 251-byte message ([11586, 11586]) took the bench from 235 MB to 6.8 GB."""
    section = {"host": "127.0.0.1", "port": free_port(), "tls_path": ""}
    created = tmp_path / "created.bin"
    calls = [("Aten.from_file", _from_file(created, 1000)),
             ("Torch.full", [_ints(11586, 11586), {"type": "float", "value": 1.0}]),
             ("Tensor.repeat", [ONE, _int(4097), _int(4097)]), ("Torch.exp", [TENSOR])]
    peak = tmp_path / "bench_peak.txt"
    with running_bench(tmp_path, section, ENV, launcher=lambda argv: launched(argv, peak)) as (bench, log_path):
        send_calls(section, [(f"{name}.{seq}", {"input_args": args, "input_kwargs": {}, "output": []})
                             for seq, (name, args) in enumerate(calls)])
        bench.wait(timeout=300)
    text = log_path.read_text()
    assert bench.returncode == 0 and not created.exists(), text
    rows = _rows(tmp_path / "out", "_rank0")
    assert "file name or path" in rows["Aten.from_file.0"][3]
    for name in ("Torch.full.1", "Tensor.repeat.2"):  # 1.3e8 and 1.7e7 elements: over the online cap of 2^24
        assert rows[name][1] == "SKIP" and "over the cap of 16777216" in rows[name][3], rows[name]
    assert int(peak.read_text()) < GIB, peak.read_text()


# -- names from data become paths only in ASCII --------------------------------------------------------
def test_op_generate_refuses_a_non_ascii_call_index_and_writes_no_file(tmp_path):
    from msprobe.pytorch.api_accuracy_checker.op_generator import generate_script, load_op_config

    extracted = tmp_path / "extracted.json"
    extracted.write_text(json.dumps({"task": "statistics", "data": {"Functional.relu.\u0663.forward": {
        "input_args": [TENSOR], "input_kwargs": {}, "output": [TENSOR]}}}))
    config = tmp_path / "config_op.json"
    config.write_text(json.dumps({"extract_api_path": str(extracted)}))
    with pytest.raises(MsprobeError) as caught:
        generate_script(load_op_config(str(config)), str(tmp_path / "ops"))
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "ops").exists()


def test_run_ut_refuses_a_non_ascii_call_index_before_it_becomes_an_error_data_file(tmp_path):
    dump = _dump(tmp_path, [])
    data = {"Functional.relu.\u0663.forward": {"input_args": [TENSOR], "input_kwargs": {}, "output": [TENSOR]}}
    dump.write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch", "data": data}))
    code, log, _ = _measured(["-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-api_info", str(dump),
                              "-o", str(tmp_path / "out"), "-save_error_data"], tmp_path)
    assert code == 0, log
    row, = _rows(tmp_path / "out").values()
    assert row[1] == "SKIP" and "refused" in row[3], row
    assert all(name.isascii() for _, _, names in os.walk(tmp_path) for name in names)
