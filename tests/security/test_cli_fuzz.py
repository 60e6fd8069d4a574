"""Every CLI command fed a corpus of broken inputs: exit 1 and one `[ERROR]` line, never a traceback.

Commands run in-process through `msprobe.cli.main` (fast); the corpus is the same for all: empty,
truncated, binary, deep nesting, absurd numbers, wrong JSON shapes and a pickle that would create a
file if it were unpickled. An `[ERROR]` line that says "unexpected" means an exception escaped the
command (a bug caught only by the CLI's last resort), so it fails the test as well.
"""
import json
import os
import pickle
import sys

import pytest

from msprobe.cli import FRAMEWORKS, available_commands, main


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


_TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
           "Norm": 1.0, "requires_grad": False}
_VALID_DUMP = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None,
               "data": {"Functional.relu.0.forward": {"input_args": [_TENSOR], "input_kwargs": {}, "output": [_TENSOR]}}}


def _corpus(marker):
    valid = json.dumps(_VALID_DUMP, indent=1).encode()
    return {
        "empty": b"",
        "truncated": valid[: len(valid) // 2],
        "binary": bytes(range(256)) * 8,
        "deep nesting": b"[" * 100_000 + b"]" * 100_000,
        "5000-digit number": b'{"data": {"Functional.relu.0.forward": {"input_args": [{"Max": 1' + b"0" * 5000 + b"}]}}}",
        "top level list": b"[1, 2, 3]",
        "top level string": b'"dump"',
        "null": b"null",
        "data is a list": b'{"task": "statistics", "data": []}',
        "entry is a number": b'{"task": "statistics", "data": {"Functional.relu.0.forward": 5}}',
        "pickle": pickle.dumps(_Payload(marker)),
        # what a reader builds, bounded (docs/security.md, "Readers bounded by what they build")
        "lone surrogate name": b'{"task": "statistics", "data": {"Functional.\\ud800.0.forward": 5}}',
        "shape 10^30": b'{"task": "statistics", "data": {"Functional.relu.0.forward": {"input_args": [{"type": '
                       b'"torch.Tensor", "dtype": "torch.float32", "shape": [1' + b"0" * 30 + b']}]}}}',
        "many empty objects": b"[" + b"{}," * 300_000 + b"{}]",
    }


def _write(folder, name, content):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "wb") as handle:
        handle.write(content)
    return path


def _json_file(folder, name, obj):
    return _write(folder, name, json.dumps(obj).encode())


# -- how each command is handed the broken file: (framework, command, variant) -> argv -----------------
def _compare_json(tmp, broken):
    return ["-i", _write(tmp, "compare.json", broken), "-o", os.path.join(tmp, "out")]


def _compare_dump(tmp, broken):
    npu = _write(os.path.join(tmp, "npu"), "dump.json", broken)
    bench = _write(os.path.join(tmp, "bench"), "dump.json", broken)
    return ["-i", _json_file(tmp, "compare.json", {"npu_path": npu, "bench_path": bench}), "-o", os.path.join(tmp, "out")]


def _graph_json(tmp, broken):
    return ["-i", _write(tmp, "graph.json", broken), "-o", os.path.join(tmp, "out")]


def _graph_dump(tmp, broken):
    folders = []
    for side in ("npu", "bench"):
        folder = os.path.join(tmp, side, "step0", "rank0")
        for name in ("dump.json", "construct.json", "stack.json"):
            _write(folder, name, broken)
        folders.append(folder)
    return ["-i", _json_file(tmp, "graph.json", {"npu_path": folders[0], "bench_path": folders[1]}),
            "-o", os.path.join(tmp, "out")]


def _run_ut_api_info(tmp, broken):
    return ["-api_info", _write(tmp, "dump.json", broken), "-o", os.path.join(tmp, "out")]


def _multi_run_ut_api_info(tmp, broken):
    return _run_ut_api_info(tmp, broken) + ["-n", "1"]


def _run_ut_resume(tmp, broken):
    result = _write(tmp, "accuracy_checking_result_20250101000000.csv", broken)
    _write(tmp, "accuracy_checking_details_20250101000000.csv", broken)
    return ["-api_info", _json_file(tmp, "dump.json", _VALID_DUMP), "-csv_path", result]


def _run_ut_config(tmp, broken):
    return ["-api_info", _json_file(tmp, "dump.json", _VALID_DUMP), "-config", _write(tmp, "config.json", broken),
            "-o", os.path.join(tmp, "out")]


def _api_precision_compare(tmp, broken):
    csv_path = _write(tmp, "accuracy_checking_details_1.csv", broken)
    return ["-npu", csv_path, "-gpu", csv_path, "-o", os.path.join(tmp, "out")]


def _op_generate_config(tmp, broken):
    return ["-i", _write(tmp, "config_op.json", broken), "-o", os.path.join(tmp, "out")]


def _op_generate_extract(tmp, broken):
    config = {"extract_api_path": _write(tmp, "extract.json", broken)}
    return ["-i", _json_file(tmp, "config_op.json", config), "-o", os.path.join(tmp, "out")]


def _op_generate_dump(tmp, broken):
    config = {"dump_json_path": _write(tmp, "dump.json", broken), "api_name": "Functional.relu.0",
              "extract_api_path": os.path.join(tmp, "extract.json")}
    return ["-i", _json_file(tmp, "config_op.json", config), "-o", os.path.join(tmp, "out")]


def _merge_result_config(tmp, broken):
    os.makedirs(os.path.join(tmp, "in"), exist_ok=True)
    return ["-i", os.path.join(tmp, "in"), "-o", os.path.join(tmp, "out"), "-config", _write(tmp, "config.yaml", broken)]


def _merge_result_xlsx(tmp, broken):
    folder = os.path.join(tmp, "in")
    for rank in (0, 1):
        _write(folder, f"compare_result_rank{rank}-rank{rank}_20250101000000.xlsx", broken)
    config = _write(tmp, "config.yaml", b"api:\n- Functional.relu\ncompare_index:\n- Max diff\n")
    return ["-i", folder, "-o", os.path.join(tmp, "out"), "-config", config]


def _grad_compare(tmp, broken):
    dirs = [os.path.join(tmp, side, "rank0") for side in ("a", "b")]
    for folder in dirs:
        _write(folder, "grad_summary_0.csv", broken)
        _write(folder, "grad_summary_1.csv", broken)
    return ["-i", dirs[0], "-b", dirs[1], "-o", os.path.join(tmp, "out")]


def _run_overflow_check(tmp, broken):
    return ["-api_info", _write(tmp, "dump.json", broken), "-o", os.path.join(tmp, "out")]


def _code_mapping_ir(tmp, broken):
    dump = _write(os.path.join(tmp, "dump"), "statistic.csv", b"Op Type,Op Name,Task ID\nAdd,Default/Add-op1,1\n")
    return ["--ir", _write(tmp, "graph_build_0.ir", broken), "--dump_data", dump, "--output", os.path.join(tmp, "out")]


def _code_mapping_dump(tmp, broken):
    ir = _write(tmp, "graph_build_0.ir", b"# IR entry: @main\n%1(x) = Add(%para1, %para2)\n")
    return ["--ir", ir, "--dump_data", _write(tmp, "statistic.csv", broken), "--output", os.path.join(tmp, "out")]


def _ckpt_compare(tmp, broken):
    return ["--ckpt1", _write(tmp, "a.pt", broken), "--ckpt2", _write(tmp, "b.pt", broken), "-o",
            os.path.join(tmp, "out")]


def _ckpt_compare_safetensors(tmp, broken):
    return ["--ckpt1", _write(tmp, "a.safetensors", broken), "--ckpt2", _write(tmp, "b.safetensors", broken), "-o",
            os.path.join(tmp, "out")]


def _ckpt_compare_index(tmp, broken):
    folder = os.path.join(tmp, "sharded")
    _write(folder, "model.safetensors.index.json", broken)
    return ["--ckpt1", folder, "--ckpt2", folder, "-o", os.path.join(tmp, "out")]


def _config_check(tmp, broken):
    return ["-c", _write(tmp, "a.zip", broken), _write(tmp, "b.zip", broken), "-o", os.path.join(tmp, "out")]


def _compile_check(tmp, broken):
    return ["--script", _write(tmp, "target.py", broken), "-o", os.path.join(tmp, "out")]


def _bisect(tmp, broken):
    return ["--script", _write(tmp, "target.py", broken), "-o", os.path.join(tmp, "out")]


def _job_dump(tmp, broken):
    for rank in (0, 1):
        _write(os.path.join(tmp, "dump", "step0", f"rank{rank}"), "dump.json", broken)
    return ["-i", os.path.join(tmp, "dump"), "-o", os.path.join(tmp, "out")]


# variant -> how to write the argv; a (function, frameworks) pair when only some frameworks have the option
VARIANTS = {
    "compare": {"compare.json": _compare_json, "dump.json": _compare_dump},
    "graph": {"input json": _graph_json, "dump folder": _graph_dump},
    "run_ut": {"-api_info": _run_ut_api_info, "-csv_path": _run_ut_resume, "-config": (_run_ut_config, ("pytorch",))},
    "multi_run_ut": {"-api_info": _multi_run_ut_api_info},
    "api_precision_compare": {"details csv": _api_precision_compare},
    "op_generate": {"config_op.json": _op_generate_config, "extract_api_path": _op_generate_extract,
                    "dump_json_path": _op_generate_dump},
    "merge_result": {"-config": _merge_result_config, "xlsx": _merge_result_xlsx},
    "grad_compare": {"summary csv": _grad_compare},
    "run_overflow_check": {"-api_info": _run_overflow_check},
    "code_mapping": {"--ir": _code_mapping_ir, "--dump_data": _code_mapping_dump},
    "ckpt_compare": {"file": _ckpt_compare, "safetensors": _ckpt_compare_safetensors, "index": _ckpt_compare_index},
    "config_check": {"pack": _config_check},
    "bisect": {"script": _bisect},
    "compile_check": {"script": _compile_check},
    "nan_analyze": {"dump root": _job_dump},
    "trend": {"dump root": _job_dump},
}

# (framework, command, variant, corpus item) -> why it still fails; reported to the command's owner
KNOWN_FAILURES = {
}

def _argv_maker(command, variant):
    entry = VARIANTS[command][variant]
    return entry[0] if isinstance(entry, tuple) else entry


CASES = [(framework, command, variant)
         for framework in FRAMEWORKS for command in available_commands(framework)
         for variant, entry in sorted(VARIANTS.get(command, {}).items())
         if not isinstance(entry, tuple) or framework in entry[1]]


INTERACTIVE = ("parse",)  # a session reading commands from stdin: fuzzed by test_parse_session_survives_...
NO_INPUT_FILE = ("config",)  # prints the config reference: reads no file


def test_every_command_has_a_fuzz_entry():
    missing = sorted({(framework, command) for framework in FRAMEWORKS for command in available_commands(framework)
                      if command not in VARIANTS and command not in INTERACTIVE + NO_INPUT_FILE})
    assert not missing, f"add how to feed these commands a broken file: {missing}"


@pytest.mark.parametrize("framework, command, variant", CASES, ids=["-".join(case) for case in CASES])
def test_broken_inputs_are_one_error_line(framework, command, variant, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    failures = []
    for item, content in _corpus(str(marker)).items():
        folder = str(tmp_path / item.replace(" ", "_"))
        argv = ["-f", framework, command, *_argv_maker(command, variant)(folder, content)]
        code = main(argv)
        out = capsys.readouterr()
        text = out.out + out.err
        errors = [line for line in text.splitlines() if line.startswith("[ERROR]")]
        good = code == 1 and len(errors) == 1 and "Traceback" not in text and "unexpected" not in errors[0]
        if not good and (framework, command, variant, item) not in KNOWN_FAILURES:
            failures.append(f"{item}: exit {code}, {len(errors)} [ERROR] line(s): {(errors or [text[-300:]])[0][:300]}")
    assert not marker.exists(), "a broken input ran code"
    assert not failures, "\n".join(failures)


def _one_error_line(framework, command, variant, item, folder, capsys):
    code = main(["-f", framework, command, *_argv_maker(command, variant)(folder, _corpus("/nonexistent/x")[item])])
    out = capsys.readouterr()
    text = out.out + out.err
    errors = [line for line in text.splitlines() if line.startswith("[ERROR]")]
    return code == 1 and len(errors) == 1 and "Traceback" not in text and "unexpected" not in errors[0]


@pytest.mark.parametrize("framework, command, variant, item", [
    pytest.param(*key, marks=pytest.mark.xfail(strict=True, reason=reason)) for key, reason in KNOWN_FAILURES.items()
] or [pytest.param("pytorch", "compare", "compare.json", "binary")])
def test_known_failures_fail_until_their_owner_fixes_them(framework, command, variant, item, tmp_path, capsys):
    """strict xfail: when the owner fixes one, this turns into XPASS and says to remove the entry."""
    assert _one_error_line(framework, command, variant, item, str(tmp_path / "case"), capsys)


_UNREADABLE = ("empty", "truncated", "binary", "deep nesting", "5000-digit number", "pickle")


_PARSE_KNOWN_FAILURES = {
}
_PARSE_CASES = [pytest.param(framework, item, marks=[pytest.mark.xfail(strict=True, reason=_PARSE_KNOWN_FAILURES[item])]
                             if item in _PARSE_KNOWN_FAILURES else [])
                for framework in FRAMEWORKS if "parse" in available_commands(framework)
                for item in _corpus("/nonexistent/x")]


@pytest.mark.parametrize("framework, item", _PARSE_CASES)
def test_parse_session_survives_broken_files_with_one_error_line_each(framework, item, tmp_path, capsys, monkeypatch):
    """`parse` is interactive: each command given a broken file prints one [ERROR] line, the session goes
    on, and the end of input ends it with status 0."""
    import io

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    folder = str(tmp_path / "case")
    content = _corpus(str(marker))[item]
    dump = _write(folder, "dump.json", content)
    pt, npy = _write(folder, "x.pt", content), _write(folder, "x.npy", content)
    script = f"pk -f {dump} -n Functional.relu.0.forward\npt -n {pt}\npt -n {npy}\ncn -m {pt} -g {npy}\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(script))
    code = main(["-f", framework, "parse"])
    out = capsys.readouterr()
    text = out.out + out.err
    errors = [line for line in text.splitlines() if "[ERROR]" in line]
    assert not marker.exists(), "a broken input ran code"
    assert code == 0 and "Traceback" not in text, text[-500:]
    assert not [line for line in errors if " failed: " in line], errors  # the session's catch-all: a bug
    if item in _UNREADABLE:
        assert len(errors) == 4, errors


def test_console_script_prints_one_line_for_a_broken_input(tmp_path):
    """One real process: the installed entry point, stdout and stderr together."""
    import subprocess

    broken = _write(str(tmp_path), "compare.json", b"\x80\x81 not json")
    result = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "compare", "-i", broken,
                             "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("[ERROR]"), lines


@pytest.mark.parametrize("command", ["compare", "graph"])
def test_a_400_digit_statistic_is_handled_without_a_traceback(command, tmp_path, capsys):
    """10**400 fits JSON but no float: compare/graph either report the row or stop with one line."""
    huge = dict(_TENSOR, Max=10 ** 400, Norm=-(10 ** 400))
    dump = dict(_VALID_DUMP, data={"Functional.relu.0.forward": {"input_args": [huge], "input_kwargs": {},
                                                                  "output": [huge]}})
    content = json.dumps(dump).encode()
    maker = _compare_dump if command == "compare" else _graph_dump
    code = main(["-f", "pytorch", command, *maker(str(tmp_path), content)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code in (0, 1) and "Traceback" not in text and "unexpected" not in text, text[-500:]
    assert len([line for line in text.splitlines() if line.startswith("[ERROR]")]) == (1 if code else 0)
