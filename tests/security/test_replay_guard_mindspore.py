"""MindSpore run_ut gets PyTorch's replay rule (issue 41): no file, path or handle parameters, no tensor over the cap.

Real MindSpore (CPU, PyNative) in a child process, its peak RSS read by test_replay_guard.LAUNCHER, under an address-space
limit so that a regression fails the test instead of the machine.
"""
import json

import pytest

from msprobe.core.api_resolver import ApiAllowList, ApiNameRefused, resolve
from tests.security.test_replay_guard import GIB, _int, _ints, _measured, _rows

MS_TENSOR = {"type": "mindspore.Tensor", "dtype": "Float32", "shape": [2, 3], "Max": 1.0, "Min": -1.0, "Mean": 0.0,
             "Norm": 1.0, "requires_grad": False}
MS_OVERSIZED = [
    ("Mint.full", [_ints(20000, 20000), {"type": "float", "value": 1.0}]),
    ("Mint.ones", [_ints(20000, 20000)]),
    ("Mint.zeros", [_ints(20000, 20000)]),
    ("Mint.arange", [_int(400_000_000)]),
    ("Mint.eye", _ints(20000)),
    ("Mint.tile", [MS_TENSOR, _ints(10000, 10000)]),
    ("Tensor.repeat", [MS_TENSOR, _int(10000), _int(10000)]),
    ("MintFunctional.pad", [MS_TENSOR, _ints(0, 20000, 0, 20000)]),
]
MS_HONEST = [
    ("Mint.add", [MS_TENSOR, MS_TENSOR]),
    ("Mint.sum", [MS_TENSOR, _int(1)]),
    ("MintFunctional.relu", [MS_TENSOR]),
    ("Mint.eye", _ints(3)),
]


def _ms_dump(folder, entries):
    data = {f"{name}.{index}.forward": {"input_args": args, "input_kwargs": {}, "output": [MS_TENSOR]}
            for index, (name, args) in enumerate(entries)}
    path = folder / "dump.json"
    path.write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "mindspore", "data": data}))
    return path


def test_mindspore_apis_with_file_path_or_handle_parameters_are_refused(ms):
    from msprobe.mindspore.api_accuracy_checker.replay_guard import signature_refusal
    from msprobe.mindspore.dump.api_registry import api_allow_list

    assert "ckpt_file_name" in signature_refusal(ms.save_checkpoint)
    assert "generator" in signature_refusal(ms.mint.bernoulli)
    allow = ApiAllowList("mindspore", {"Mint": {"save_checkpoint": (ms, "save_checkpoint"), "add": (ms.mint, "add")}},
                         refusal=signature_refusal)
    with pytest.raises(ApiNameRefused, match="'ckpt_file_name' is a file name"):
        resolve(allow, "Mint", "save_checkpoint", warn=False)
    assert resolve(allow, "Mint", "add", warn=False) is ms.mint.add
    real = api_allow_list()
    with pytest.raises(ApiNameRefused, match="'generator'"):
        resolve(real, "Mint", "bernoulli", warn=False)
    assert resolve(real, "Mint", "full", warn=False) is ms.mint.full


def test_mindspore_run_ut_refuses_oversized_calls_before_they_run_and_stays_under_a_gib(tmp_path):
    dump = _ms_dump(tmp_path, MS_OVERSIZED + MS_HONEST)
    code, log, peak = _measured(["-m", "msprobe.cli", "-f", "mindspore", "run_ut", "-api_info", str(dump),
                                 "-o", str(tmp_path / "out")], tmp_path)
    assert code == 0 and "Traceback" not in log, log
    rows = _rows(tmp_path / "out")
    for index, (name, _) in enumerate(MS_OVERSIZED):
        row = rows[f"{name}.{index}"]
        assert row[1] == "SKIP" and "over the cap" in row[3] and "nothing was run" in row[3], row
    for index, (name, _) in enumerate(MS_HONEST, start=len(MS_OVERSIZED)):
        assert rows[f"{name}.{index}"][1] == "pass", rows[f"{name}.{index}"]
    assert peak < GIB, f"peak {peak / GIB:.2f} GiB"


def test_without_a_torch_bench_the_numbers_bound_the_size():
    from msprobe.core.errors import UnsupportedError
    from msprobe.mindspore.api_accuracy_checker.replay_guard import check_call_size

    check_call_size("Mint.sum.0", [(2, 3)], [[None, 1], {}])
    check_call_size("Mint.reshape.0", [(1 << 29,)], [[None, [1 << 14, 1 << 15]], {}])  # as large as its input
    with pytest.raises(UnsupportedError, match="multiply to 400000000, over the cap"):
        check_call_size("Mint.ones.0", [], [[[20000, 20000]], {}])
