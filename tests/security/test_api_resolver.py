"""Hostile API names against every place that turns a name into a callable, in both frameworks.

A name from a dump.json, a config_op.json or a bench socket resolves only through the allow-list of the
APIs the dump wraps (msprobe.core.api_resolver). The catalogue holds module hops (os, sys, subprocess,
builtins, importlib, fx), file writers and readers (save, load, open, from_file), dunder chains
(__class__, __globals__, __init__), non-API helpers the namespaces re-export, very long and non-ASCII
names. Each entry point must refuse each of them, and a crafted dump whose names would run
`touch <marker>` must leave no marker behind.
"""
import csv
import glob
import json
import os
import re
import subprocess
import sys

import pytest

from msprobe.core.api_resolver import ApiAllowList, ApiNameRefused, resolve, resolve_entry, shown_name
from msprobe.core.errors import MsprobeError, UnsupportedError
from tests.net import free_port
from tests.security.online_bench import running_bench, send_calls

ENV = dict(os.environ, MSPROBE_NO_PROGRESS="1", OMP_NUM_THREADS="1")
TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 1.0, "Min": -1.0,
          "Mean": 0.0, "Norm": 1.0, "requires_grad": False}
MS_TENSOR = dict(TENSOR, type="mindspore.Tensor", dtype="Float32")

# names of the shape "Prefix.api": each one reached code or files before names went through the allow-list
TORCH_HOSTILE = [
    "Torch.os.system", "Torch.os.popen", "Torch.sys.exit", "Torch.subprocess.run", "Torch.builtins.exec",
    "Torch.builtins.eval", "Torch.importlib.import_module", "Torch.fx.graph_module._exec_with_source",
    "Torch.save", "Torch.load", "Torch.from_file", "Torch.open", "Torch.hub.load", "Torch.jit.load",
    "Torch.compile", "Torch.ops.load_library", "Torch.ops.import_module", "Torch.serialization.os.system",
    "Torch.utils.cpp_extension.load_inline", "Torch.overrides.handle_torch_function",
    "Functional.torch.os.system", "Functional.Optional", "Functional.handle_torch_function",
    "Functional.boolean_dispatch", "Functional.warnings.warn", "Functional.math.factorial",
    "Tensor.__class__", "Tensor.__class__.__init__", "Tensor.__init__.__globals__", "Tensor.__reduce_ex__",
    "Tensor.__setstate__", "Tensor.__getattribute__", "Tensor.__subclasses__", "Tensor.__dict__",
    "Tensor.__class__.__base__.__subclasses__", "Tensor.register_hook", "Tensor.__globals__",
    "VF.os.system", "VF.__class__", "Aten.__class__.__init__", "Aten.__dict__", "Aten.load_library",
    "Aten.addmm.__globals__", "Aten.add.__class__", "Evil.os.system",
    "Torch." + "a" * 300, "Torch." + ".".join(["linalg"] * 60), "Torch.\u043es.system",
    "Torch.os.\u0455ystem", "Torch.\uff4fs.system", "Torch.os.system\u200b",
]
MS_HOSTILE = [
    "Mint.mindspore.log.os.system", "Mint.os.system", "Mint.sys.exit", "Mint.subprocess.run",
    "Mint.builtins.exec", "Mint.importlib.import_module", "Mint.ops.os.system", "Mint.nn.functional.os.system",
    "Mint.linalg.__class__.__init__", "Mint.special.__builtins__", "Mint.distributed.os.system",
    "Mint.__class__", "Mint.__dict__", "Mint.__loader__.load_module", "Mint.jit_forbidden_register",
    "Mint.save_checkpoint", "Mint.load_checkpoint", "Mint.mindspore.save_checkpoint",
    "MintFunctional.mindspore.log.os.system", "MintFunctional.__builtins__", "MintFunctional.Tensor.__init__",
    "Tensor.__class__.__init__", "Tensor.__init__", "Tensor.__reduce_ex__", "Tensor.__globals__",
    "Mint." + "a" * 300, "Mint.\u043es.system", "Mint.os.\u0455ystem",
]
# online_dispatch names ops 'namespace::packet.overload'; torch.ops itself has import_module and load_library
OPERATOR_HOSTILE = [
    "load_library::__self__.load_library", "import_module::os", "aten::__class__.__init__", "aten::add.__globals__",
    "os::system", "aten::__dict__", "builtins::exec", "aten::" + "a" * 300, "aten::\u0430dd.Tensor", "aten",
]


def _ids(names):
    return [ascii(name)[1:-1][:60] for name in names]


def _payload(name, marker):
    """input_args that would create `marker` if the name's callable ran."""
    if "exec" in name or "eval" in name or "compile" in name:
        return [{"type": "str", "value": f"open({str(marker)!r}, 'w').close()"}]
    if "save" in name:
        return [TENSOR, {"type": "str", "value": str(marker)}]
    return [{"type": "str", "value": f"touch {marker}"}]


def _hostile_dump(folder, names, framework, legit):
    """dump.json with one entry per hostile name (its marker: marker_<i>) and one legitimate API."""
    tensor = MS_TENSOR if framework == "mindspore" else TENSOR
    data = {f"{name}.0.forward": {"input_args": _payload(name, folder / f"marker_{i}"), "input_kwargs": {},
                                  "output": [tensor]} for i, name in enumerate(names)}
    data[f"{legit}.0.forward"] = {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]}
    path = folder / "dump.json"
    path.write_text(json.dumps({"task": "statistics", "level": "L1", "framework": framework, "data": data}))
    return path


def _markers(folder):
    return sorted(glob.glob(str(folder / "**" / "marker_*"), recursive=True))


def _result_rows(out_dir, suffix=""):
    path, = glob.glob(os.path.join(str(out_dir), f"accuracy_checking_result_*[0-9]{suffix}.csv"))
    with open(path, newline="", encoding="utf-8") as handle:
        return {row[0]: row for row in list(csv.reader(handle))[1:]}


def _cli(*argv, timeout=400):
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", *argv], capture_output=True, text=True,
                          env=ENV, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


def _one_warning_per_name(log, names, start="[WARNING]"):
    """Each refused name is said once, on one line, as the resolver shows it (ASCII, cut short)."""
    for name in names:
        shown = re.compile(re.escape(shown_name(name)) + "[ ']")
        lines = [line for line in log.splitlines() if shown.search(line) and "refused" in line]
        assert len(lines) == 1 and lines[0].startswith(start), (name, lines)
    assert "Traceback" not in log


def _check_refused_rows(rows, names, refused_column=3):
    for name in names:
        row = rows[f"{name}.0"]
        assert row[1] == "SKIP" and "refused" in row[refused_column], row


# -- the core resolver ----------------------------------------------------------------------------
class _Namespace:
    """A framework namespace of the test: one API and everything a walk of attributes could reach."""
    import os as os_module

    @staticmethod
    def relu(x):
        return max(x, 0)


def test_core_resolver_returns_listed_apis_and_refuses_any_other_name():
    allow = ApiAllowList("demo", {"Functional": {"relu": (_Namespace, "relu")}}, version="1.0")
    assert resolve(allow, "Functional", "relu")(-3) == 0
    entry, function = resolve_entry(allow, "Functional.relu.4.backward")
    assert (entry.prefix, entry.api, entry.index, entry.direction, function(5)) == ("Functional", "relu", "4",
                                                                                     "backward", 5)
    for prefix, api in [("Functional", "os_module.system"), ("Functional", "relu.__globals__"),
                        ("Functional", "__class__"), ("Functional", "os_module"), ("Torch", "relu"),
                        ("Functional", "r\u0435lu"), ("Functional", "relu" * 100), ("Functional", ""),
                        ("Functional", None), (None, "relu")]:
        with pytest.raises(ApiNameRefused) as caught:
            resolve(allow, prefix, api, warn=False)
        assert "\n" not in str(caught.value) and len(str(caught.value)) < 300
    with pytest.raises(ApiNameRefused, match="not an API name"):
        resolve_entry(allow, "Functional.relu\nimport os.0", warn=False)


def test_refusals_are_unsupported_errors_so_run_ut_writes_a_skip_row():
    assert issubclass(ApiNameRefused, UnsupportedError) and issubclass(ApiNameRefused, MsprobeError)


# -- PyTorch entry points -------------------------------------------------------------------------
@pytest.mark.parametrize("name", TORCH_HOSTILE, ids=_ids(TORCH_HOSTILE))
def test_pytorch_resolvers_refuse_hostile_names(name):
    from msprobe.core.run_ut.api_info import ApiCase
    from msprobe.pytorch.api_accuracy_checker.executor import TorchOps
    from msprobe.pytorch.api_accuracy_checker.op_resolver import resolve_api
    from msprobe.pytorch.online_run_ut.bench_ops import OnlineTorchOps

    prefix, api = name.split(".", 1)
    with pytest.raises(ApiNameRefused):  # run_ut, multi_run_ut and run_overflow_check resolve here
        resolve_api(prefix, api, warn=False)
    case = ApiCase(name=f"{name}.0", prefix=prefix, api=api, forward={"input_args": [], "input_kwargs": {}})
    for ops in (TorchOps(), OnlineTorchOps()):  # offline executors, online run_ut's bench
        with pytest.raises(ApiNameRefused):
            ops.resolve(case)


@pytest.mark.parametrize("name", TORCH_HOSTILE, ids=_ids(TORCH_HOSTILE))
def test_op_generate_refuses_hostile_names_before_writing_anything(name, tmp_path):
    from msprobe.pytorch.api_accuracy_checker.op_generator import generate_script, load_op_config

    record = {"input_args": _payload(name, tmp_path / "marker_0"), "input_kwargs": {}, "output": [TENSOR]}
    extracted = tmp_path / "extracted.json"
    extracted.write_text(json.dumps({"task": "statistics", "data": {f"{name}.0.forward": record}}))
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"task": "statistics", "data": {f"{name}.0.forward": record}}))
    configs = [{"extract_api_path": str(extracted)},  # an extracted file given directly
               {"dump_json_path": str(dump), "api_name": f"{name}.0", "extract_api_path": str(tmp_path / "x.json")}]
    for number, raw in enumerate(configs):
        path = tmp_path / f"config_{number}.json"
        path.write_text(json.dumps(raw))
        with pytest.raises(MsprobeError) as caught:
            generate_script(load_op_config(str(path)), str(tmp_path / "ops"))
        assert "\n" not in str(caught.value)
    assert not (tmp_path / "ops").exists() and not (tmp_path / "x.json").exists() and not _markers(tmp_path)


def test_op_generate_cli_refuses_a_module_hop_with_one_error_line(tmp_path):
    extracted = tmp_path / "extracted.json"
    extracted.write_text(json.dumps({"task": "statistics", "data": {"Torch.os.system.0.forward": {
        "input_args": _payload("Torch.os.system", tmp_path / "marker_0"), "input_kwargs": {}, "output": []}}}))
    config = tmp_path / "config_op.json"
    config.write_text(json.dumps({"extract_api_path": str(extracted)}))
    code, log = _cli("-f", "pytorch", "op_generate", "-i", str(config), "-o", str(tmp_path / "ops"))
    errors = [line for line in log.splitlines() if line.startswith("[ERROR]")]
    assert code == 1 and len(errors) == 1 and "Torch.os.system" in errors[0] and "refused" in errors[0], log
    assert "Traceback" not in log and not (tmp_path / "ops").exists() and not _markers(tmp_path)


def test_op_generate_still_writes_scripts_for_listed_apis(tmp_path):
    from msprobe.pytorch.api_accuracy_checker.op_generator import generate_script, load_op_config

    for name, call in [("Torch.linalg.vector_norm", "torch.linalg.vector_norm"),
                       ("Tensor.__mul__", "torch.Tensor.__mul__"), ("Aten.addmm.default", "torch.ops.aten.addmm.default")]:
        extracted = tmp_path / f"{name}.json"
        extracted.write_text(json.dumps({"task": "statistics", "data": {f"{name}.0.forward": {
            "input_args": [TENSOR], "input_kwargs": {}, "output": [TENSOR]}}}))
        config = tmp_path / "config_op.json"
        config.write_text(json.dumps({"extract_api_path": str(extracted)}))
        script = generate_script(load_op_config(str(config)), str(tmp_path / "ops"))
        assert f"return {call}(*args, **kwargs)" in open(script, encoding="utf-8").read()


@pytest.mark.parametrize("qualified", OPERATOR_HOSTILE, ids=_ids(OPERATOR_HOSTILE))
def test_online_dispatch_refuses_operator_names_that_are_not_registered_ops(qualified):
    from msprobe.pytorch.online_dispatch.op_call import resolve_op

    with pytest.raises(ApiNameRefused):
        resolve_op(qualified)


def test_online_dispatch_still_resolves_registered_operators():
    import torch

    from msprobe.pytorch.online_dispatch.op_call import resolve_op

    assert resolve_op("aten::addmm") is torch.ops.aten.addmm.default
    assert resolve_op("aten::add.Tensor") is torch.ops.aten.add.Tensor
    assert resolve_op("prims::add") is torch.ops.prims.add.default


def test_recorded_layout_and_memory_format_names_resolve_only_to_those_constants():
    import torch

    from msprobe.pytorch.api_accuracy_checker.arguments import _scalar

    assert _scalar({"type": "torch.memory_format", "value": "torch.channels_last"}, "cpu") is torch.channels_last
    assert _scalar({"type": "torch.layout", "value": "torch.strided"}, "cpu") is torch.strided
    for node in ({"type": "torch.layout", "value": "torch.save"}, {"type": "torch.layout", "value": "os"},
                 {"type": "torch.memory_format", "format": "load", "value": "x"}):
        with pytest.raises(UnsupportedError):
            _scalar(node, "cpu")


def test_pytorch_run_ut_cli_on_a_crafted_dump_runs_nothing(tmp_path):
    dump = _hostile_dump(tmp_path, TORCH_HOSTILE, "pytorch", "Torch.exp")
    code, log = _cli("-f", "pytorch", "run_ut", "-api_info", str(dump), "-o", str(tmp_path / "out"))
    assert code == 0, log
    assert not _markers(tmp_path), log
    rows = _result_rows(tmp_path / "out")
    _check_refused_rows(rows, TORCH_HOSTILE)
    assert rows["Torch.exp.0"][1] == "pass"  # the listed API next to them still runs
    _one_warning_per_name(log, TORCH_HOSTILE)


def test_pytorch_multi_run_ut_cli_on_a_crafted_dump_runs_nothing(tmp_path):
    names = TORCH_HOSTILE[:20]
    dump = _hostile_dump(tmp_path, names, "pytorch", "Functional.relu")
    code, log = _cli("-f", "pytorch", "multi_run_ut", "-api_info", str(dump), "-o", str(tmp_path / "out"),
                     "-n", "2")
    assert code == 0, log
    assert not _markers(tmp_path), log
    rows = _result_rows(tmp_path / "out")
    _check_refused_rows(rows, names)
    assert rows["Functional.relu.0"][1] == "pass"
    _one_warning_per_name(log, names)


def test_pytorch_run_overflow_check_cli_on_a_crafted_dump_runs_nothing(tmp_path):
    names = ["Torch.os.system", "Torch.save", "Tensor.__class__.__init__", "Torch.fx.graph_module._exec_with_source"]
    overflowing = dict(TENSOR, Max=float("inf"))
    data = {f"{name}.0.forward": {"input_args": _payload(name, tmp_path / f"marker_{i}"), "input_kwargs": {},
                                  "output": [overflowing]} for i, name in enumerate(names)}
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"task": "overflow_check", "level": "L1", "framework": "pytorch", "data": data}))
    code, log = _cli("-f", "pytorch", "run_overflow_check", "-api_info", str(dump), "-o", str(tmp_path / "out"))
    assert code == 0 and "Traceback" not in log, log
    assert not _markers(tmp_path), log
    report, = glob.glob(str(tmp_path / "out" / "run_overflow_check_result_*.csv"))
    with open(report, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))[1:]
    assert len(rows) == len(names)
    for row in rows:
        assert "skipped" in row and any("refused" in cell for cell in row), row
    _one_warning_per_name(log, names, start="")  # the row's own terminal line



@pytest.mark.parametrize("transport", ["tcp", "shared_folder"])
def test_online_run_ut_bench_refuses_hostile_names_it_receives(tmp_path, transport):
    """Anyone who reaches the bench port, or may write into its nfs_path, sends names: none runs."""
    if transport == "tcp":
        section = {"host": "127.0.0.1", "port": free_port(), "tls_path": ""}
    else:
        (tmp_path / "nfs").mkdir()
        section = {"nfs_path": str(tmp_path / "nfs"), "port": -1}
    names = TORCH_HOSTILE[:12]
    with running_bench(tmp_path, section, ENV) as (bench, log_path):
        send_calls(section, [(f"{name}.0", {"input_args": _payload(name, tmp_path / f"marker_{seq}"),
                                             "input_kwargs": {}, "output": []}) for seq, name in enumerate(names)])
        assert bench.wait(timeout=120) == 0
    text = log_path.read_text()
    assert not _markers(tmp_path), text
    rows = _result_rows(tmp_path / "out", "_rank0")
    _check_refused_rows(rows, names)
    _one_warning_per_name(text, names)


def test_parse_looks_names_up_as_text_and_runs_nothing(tmp_path):
    from msprobe.core.parse.dump_lookup import lookup_api, render_lookup

    dump = _hostile_dump(tmp_path, ["Torch.os.system"], "pytorch", "Torch.exp")
    found = lookup_api(str(dump), "Torch.os.system.0.forward")
    assert [name for name, _, _ in found] == ["Torch.os.system.0.forward"]
    assert "Torch.os.system.0.forward" in render_lookup(found, "Torch.os.system.0.forward")
    assert not _markers(tmp_path)


# -- MindSpore entry points -----------------------------------------------------------------------
@pytest.mark.parametrize("name", MS_HOSTILE, ids=_ids(MS_HOSTILE))
def test_mindspore_resolvers_refuse_hostile_names(name, ms):
    from msprobe.core.run_ut.api_info import ApiCase
    from msprobe.mindspore.api_accuracy_checker.api_map import resolve_mindspore, resolve_torch
    from msprobe.mindspore.api_accuracy_checker.executor import MindSporeOps

    prefix, api = name.split(".", 1)
    with pytest.raises(UnsupportedError):  # refused by the allow-list, or a Tensor API run_ut never checks
        resolve_mindspore(prefix, api)
    case = ApiCase(name=f"{name}.0", prefix=prefix, api=api, forward={"input_args": [], "input_kwargs": {}})
    with pytest.raises(UnsupportedError):
        MindSporeOps().resolve(case)
    assert resolve_torch(prefix, api) is None  # the PyTorch bench of the same name is refused too


def test_mindspore_resolvers_still_find_the_mint_apis_and_their_torch_bench(ms):
    import torch
    from mindspore import mint

    from msprobe.mindspore.api_accuracy_checker.api_map import resolve_mindspore, resolve_torch

    assert resolve_mindspore("Mint", "matmul") is mint.matmul
    assert resolve_mindspore("Mint", "special.log1p") is mint.special.log1p
    assert resolve_mindspore("MintFunctional", "relu") is mint.nn.functional.relu
    assert resolve_torch("Mint", "matmul") is torch.matmul
    assert resolve_torch("Mint", "special.log1p") is torch.log1p
    assert resolve_torch("MintFunctional", "relu") is torch.nn.functional.relu
    assert resolve_torch("Tensor", "__mul__") is torch.Tensor.__mul__


def test_recorded_mindspore_dtype_names_resolve_only_to_dtypes(ms):
    from msprobe.mindspore.api_accuracy_checker.api_map import ms_dtype

    assert ms_dtype("Float16") is ms.float16 and ms_dtype("mindspore.bool") is ms.bool_
    for name in ("mindspore.log", "os", "Tensor", "save_checkpoint", "mint"):
        with pytest.raises(UnsupportedError):
            ms_dtype(name)


def test_mindspore_run_ut_cli_on_a_crafted_dump_runs_nothing(tmp_path):
    dump = _hostile_dump(tmp_path, MS_HOSTILE, "mindspore", "Mint.exp")
    code, log = _cli("-f", "mindspore", "run_ut", "-api_info", str(dump), "-o", str(tmp_path / "out"))
    assert code == 0, log
    assert not _markers(tmp_path), log
    rows = _result_rows(tmp_path / "out")
    tensor_apis = [name for name in MS_HOSTILE if name.startswith("Tensor.")]  # never in run_ut's Tensor list
    _check_refused_rows(rows, [name for name in MS_HOSTILE if name not in tensor_apis])
    for name in tensor_apis:
        assert rows[f"{name}.0"][1] == "SKIP" and "not in the list of Tensor APIs" in rows[f"{name}.0"][3]
    assert rows["Mint.exp.0"][1] == "pass"
    _one_warning_per_name(log, [name for name in MS_HOSTILE if name not in tensor_apis])


def test_mindspore_multi_run_ut_cli_on_a_crafted_dump_runs_nothing(tmp_path):
    names = [name for name in MS_HOSTILE if not name.startswith("Tensor.")][:8]
    dump = _hostile_dump(tmp_path, names, "mindspore", "Mint.exp")
    code, log = _cli("-f", "mindspore", "multi_run_ut", "-api_info", str(dump), "-o", str(tmp_path / "out"),
                     "-n", "2")
    assert code == 0, log
    assert not _markers(tmp_path), log
    rows = _result_rows(tmp_path / "out")
    _check_refused_rows(rows, names)
    assert rows["Mint.exp.0"][1] == "pass"
    _one_warning_per_name(log, names)


def test_mindspore_real_data_refuses_data_names_outside_the_tensor_folder(tmp_path, ms):
    """A crafted tensor dump named '../outside.npy': MindSpore run_ut read it (PyTorch's check was missing)."""
    import numpy as np

    from msprobe.core.run_ut.api_info import ApiCase
    from msprobe.core.run_ut.executor import executor_factory
    from msprobe.mindspore.api_accuracy_checker.executor import MindSporeOps

    tensor_dir = tmp_path / "dump_tensor_data"
    tensor_dir.mkdir()
    np.save(tmp_path / "outside.npy", np.ones((2, 3), np.float32))
    np.save(tensor_dir / "inside.npy", np.ones((2, 3), np.float32))
    for data_name, expected in (("../outside.npy", "is not a file name inside"),
                                (str(tmp_path / "outside.npy"), "is not a file name inside"),
                                ("inside.npy", None)):
        record = dict(MS_TENSOR, data_name=data_name)
        case = ApiCase(name="Mint.exp.0", prefix="Mint", api="exp",
                       forward={"input_args": [record], "input_kwargs": {}, "output": [MS_TENSOR]})
        outcome = executor_factory(MindSporeOps(), {"tensor_dir": str(tensor_dir)})(case)
        if expected is None:
            assert outcome["forward"] == "pass", outcome
        else:
            assert outcome["forward"] == "SKIP" and expected in outcome["message"], outcome
