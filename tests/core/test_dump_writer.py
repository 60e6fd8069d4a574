"""The dump writer's JSON path: the helper process, its fallbacks, and the file format."""
import io
import json
import math
import marshal
import os
import stat
import threading

import pytest

from msprobe.core.dump import json_helper as helper_module
from msprobe.core.dump import writer as writer_module
from msprobe.core.dump.json_helper import HelperError, JsonHelper, serve
from msprobe.core.dump.writer import DumpWriter, encode_dump_json

DUMP = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None,
        "data": {"Functional.relu.0.forward": {
            "input_args": ({"type": "torch.Tensor", "dtype": "torch.float32", "shape": (2, 3), "Max": 1.5,
                            "Min": -math.inf, "Mean": math.nan, "Norm": 2.0, "requires_grad": True},),
            "input_kwargs": {"inplace": {"type": "bool", "value": False}}, "output": (None,)}}}
STACK = {"Functional.relu.0.forward": ["File a.py, line 3, in f, \n relu(x)"]}


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _as_json(value):
    return json.loads(json.dumps(value))


def test_helper_process_writes_the_same_files_as_the_writer_thread(tmp_path):
    helper = JsonHelper()
    try:
        assert helper.write(str(tmp_path / "a"), {"dump.json": DUMP, "stack.json": STACK})
        assert helper._process is not None and helper._process.pid != os.getpid()
    finally:
        helper.close()
    dump = _load(tmp_path / "a" / "dump.json")
    desc = dump["data"]["Functional.relu.0.forward"]["input_args"][0]
    assert desc["shape"] == [2, 3] and desc["Min"] == -math.inf and math.isnan(desc["Mean"])
    assert (tmp_path / "a" / "dump.json").read_text(encoding="utf-8") == encode_dump_json(DUMP)
    assert _load(tmp_path / "a" / "stack.json") == STACK
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "dump.json").st_mode) == 0o640


def test_helper_reports_write_failures(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    helper = JsonHelper()
    try:
        with pytest.raises(HelperError, match="dump.json|file"):
            helper.write(str(blocker / "sub"), {"dump.json": DUMP})
        assert helper.write(str(tmp_path / "ok"), {"dump.json": DUMP})  # still serving
    finally:
        helper.close()


def test_values_marshal_cannot_carry_are_left_to_the_caller(tmp_path):
    helper = JsonHelper()
    try:
        assert helper.write(str(tmp_path), {"dump.json": {"data": {"x": object()}}}) is False
    finally:
        helper.close()


def test_writer_falls_back_to_its_own_thread_without_the_helper(tmp_path, monkeypatch):
    monkeypatch.setenv("MSPROBE_JSON_HELPER", "0")
    monkeypatch.setattr(helper_module, "_HELPER", JsonHelper())
    writer = DumpWriter(str(tmp_path), save_tensor_fn=None)
    writer.write_json(3, None, {"dump.json": DUMP, "stack.json": STACK})
    writer.drain()
    assert helper_module._HELPER._process is None
    assert _load(tmp_path / "step3" / "rank" / "dump.json") == _as_json(DUMP)


def test_a_killed_helper_is_restarted_and_a_broken_one_abandoned(tmp_path):
    import subprocess
    import sys

    helper = JsonHelper()
    assert helper.write(str(tmp_path / "a"), {"stack.json": STACK})
    helper._process.kill()
    helper._process.wait()
    assert helper.write(str(tmp_path / "b"), {"stack.json": STACK})  # a new helper
    assert _load(tmp_path / "b" / "stack.json") == STACK
    helper.close()
    # a helper that dies in the middle of a message: the caller writes the files itself from now on
    helper._process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    helper._owner_pid = os.getpid()
    assert helper.write(str(tmp_path / "c"), {"stack.json": STACK}) is False
    assert helper._disabled and helper.write(str(tmp_path / "d"), {"stack.json": STACK}) is False


def test_serve_drops_a_message_cut_off_by_a_crash(tmp_path):
    payload = marshal.dumps((str(tmp_path), [("stack.json", STACK)]))
    complete = helper_module._HEADER.pack(len(payload)) + payload
    out = io.BytesIO()
    serve(io.BytesIO(complete + complete[: len(complete) // 2]), out)
    assert out.getvalue() == b"."
    assert _load(tmp_path / "stack.json") == STACK


def test_encoding_keeps_nan_infinity_and_big_integers():
    value = {"a": (1.5, math.nan, math.inf, -math.inf, None, 2 ** 70, "null-ish"), "b": [0.1, 1e-05]}
    text = encode_dump_json({"data": {"x": value, "y": {"z": 0.17833003401756287}}})
    loaded = json.loads(text)["data"]
    assert loaded["x"]["a"][:1] == [1.5] and math.isnan(loaded["x"]["a"][1])
    assert loaded["x"]["a"][2:] == [math.inf, -math.inf, None, 2 ** 70, "null-ish"]
    assert loaded["x"]["b"] == [0.1, 1e-05] and loaded["y"]["z"] == 0.17833003401756287
    assert "NaN" in text and "-Infinity" in text and len(text.splitlines()) == 6  # one entry per line


def test_nonfinite_check_finds_nested_nan_and_infinity():
    from msprobe.core.dump.json_files import holds_nonfinite

    deep_nan = {"a": [1.0]}
    inner = deep_nan["a"]
    for _ in range(10):
        inner.append([2.0])
        inner = inner[-1]
    inner.append(math.nan)
    too_deep = [1.0]
    for _ in range(70):
        too_deep = [too_deep]
    cases = [(None, False), (1.5, False), ("NaN", False), ({"x": None, "y": (1, 2.5, "inf")}, False),
             ({"x": (1.0, -math.inf)}, True), ([{"Max": math.nan}], True), (deep_nan, True), ({math.nan: 1.0}, False),
             (too_deep, True), ((0.0, -0.0, 1e308, 5e-324), False), (float("inf"), True)]
    for value, expected in cases:
        assert holds_nonfinite(value) is expected, value


def test_entries_with_none_keep_orjson_text_and_nan_entries_are_written_as_nan():
    orjson = pytest.importorskip("orjson")
    from msprobe.core.dump.json_files import encode_dump_bytes

    plain = {"input_args": [{"type": "torch.Tensor", "Max": 1.0, "Min": None}], "input_kwargs": {"bias": None}}
    nan = {"output": [{"type": "torch.Tensor", "Max": math.nan, "Min": -math.inf, "Mean": None}]}
    text = encode_dump_bytes({"data": {"a.0.forward": plain, "b.0.forward": nan}})
    lines = text.splitlines()
    assert lines[2] == b'  "a.0.forward": ' + orjson.dumps(plain) + b","
    assert lines[3] == b'  "b.0.forward": {"output":[{"type":"torch.Tensor","Max":NaN,"Min":-Infinity,"Mean":null}]}'
    loaded = json.loads(text)["data"]
    assert loaded["a.0.forward"] == _as_json(plain)
    assert math.isnan(loaded["b.0.forward"]["output"][0]["Max"]) and loaded["b.0.forward"]["output"][0]["Mean"] is None


def test_with_orjson_the_training_thread_encodes_and_no_helper_starts(tmp_path, monkeypatch):
    pytest.importorskip("orjson")
    helper = JsonHelper()
    monkeypatch.setattr(helper_module, "_HELPER", helper)
    encoded_on = []
    real_encode = writer_module.encode_dump_bytes

    def encode(obj, *args, **kwargs):
        encoded_on.append(threading.current_thread() is threading.main_thread())
        return real_encode(obj, *args, **kwargs)

    monkeypatch.setattr(writer_module, "encode_dump_bytes", encode)
    writer = DumpWriter(str(tmp_path), save_tensor_fn=None)
    writer.write_json(0, None, {"dump.json": DUMP, "stack.json": STACK})
    writer.close()
    assert encoded_on == [True, True] and helper._process is None
    assert (tmp_path / "step0" / "rank" / "dump.json").read_text(encoding="utf-8") == encode_dump_json(DUMP)
    assert _load(tmp_path / "step0" / "rank" / "stack.json") == STACK


def test_a_step_that_cannot_be_encoded_on_the_training_thread_is_reported_not_raised(tmp_path, monkeypatch):
    monkeypatch.setenv("MSPROBE_JSON_HELPER", "0")
    monkeypatch.setattr(helper_module, "_HELPER", JsonHelper())
    writer = DumpWriter(str(tmp_path), save_tensor_fn=None)
    writer.write_json(0, None, {"dump.json": {"data": {"x": "\ud800"}}})  # a lone surrogate: no UTF-8 for it
    writer.write_json(1, None, {"dump.json": DUMP})
    writer.close()
    assert writer.failures.totals == {"JSON file sets": 1}
    assert "1 JSON file sets (step 0)" in writer.report()
    assert not (tmp_path / "step0" / "rank" / "dump.json").exists()
    assert _load(tmp_path / "step1" / "rank" / "dump.json") == _as_json(DUMP)


def test_entry_layout_is_indent_one_json_one_entry_a_line():
    pytest.importorskip("orjson")
    from msprobe.core.dump import json_files

    shared = ["File a.py, line 3, in f, \n relu(x)"]
    cases = [{}, {"data": {}}, {"a": {}}, {'k"x': "v,}", "b": [1, {"c": "]"}]}, {"x": None, "y": "null"},
             {"data": {"a": {"s": "\u2028 \u00e9 \"q\" \\ \n"}, "c": (1, None), "d": 2 ** 70}},
             {"a": [], "b": [[]], "c": "{"}, {1: "an int key"}, {"s": shared, "t": shared, "u": list(shared)}, DUMP,
             STACK, {"\x1f": 1, "\x7f": 2, "a\\b": 3, "caf\u00e9": 4, "\U0001f600": 5, "/": 6, "": 7}]
    for case in cases:
        text = json_files.encode_dump_bytes(case)
        assert json.loads(text) == json.loads(json.dumps(case, indent=1, ensure_ascii=False)), case
        data = case.get("data")
        if isinstance(data, dict):  # the top keys a line each, and each entry of "data" on its own line
            assert len(text.splitlines()) == 2 + len(case) - 1 + (len(data) + 2 if data else 1), case
        else:
            assert len(text.splitlines()) == (len(case) + 2 if case else 1), case
    # stack.json's lists kept across steps: the same bytes, each list's text taken from the first step's
    lists = {}
    kept = [json_files.encode_dump_bytes({"s": shared, "t": shared, "u": [1]}, lists=lists) for _ in range(2)]
    assert lists[id(shared)] == (shared, b'["File a.py, line 3, in f, \\n relu(x)"]') and len(lists) == 3  # + 2 [1]s
    assert kept == [json_files.encode_dump_bytes({"s": shared, "t": shared, "u": [1]})] * 2


def test_stack_texts_are_kept_across_steps_and_bounded(tmp_path, monkeypatch):
    pytest.importorskip("orjson")
    monkeypatch.setattr(writer_module, "_STACK_TEXTS", 2)
    shared = ["File a.py, line 3, in f, \n relu(x)"]
    writer = DumpWriter(str(tmp_path), save_tensor_fn=None)
    steps = [{"A.0.forward": shared, "B.0.forward": shared}, {"A.0.forward": shared, "C.0.forward": ["x"]},
             {"D.0.forward": ["y"]}, {"A.0.forward": shared}]
    for step, stacks in enumerate(steps):
        writer.write_json(step, None, {"stack.json": stacks})
        if step == 1:  # the shared list's text, made at step 0, is kept with it
            assert writer._stack_texts[id(shared)][0] is shared and len(writer._stack_texts) == 2
    writer.close()
    # three lists kept after step 2, past the bound: step 3 started the memo afresh, with its one list
    assert list(writer._stack_texts) == [id(shared)]
    assert [_load(tmp_path / f"step{step}" / "rank" / "stack.json") for step in range(4)] == steps


def test_a_stack_json_equal_to_the_last_one_is_linked_not_written(tmp_path, monkeypatch):
    pytest.importorskip("orjson")
    shared = ["File a.py, line 3, in f, \n relu(x)"]
    writer = DumpWriter(str(tmp_path), save_tensor_fn=None)
    encoded = []
    real_encode = writer_module.encode_dump_bytes

    def encode(obj, *args, **kwargs):
        encoded.append(obj)
        return real_encode(obj, *args, **kwargs)
    monkeypatch.setattr(writer_module, "encode_dump_bytes", encode)
    a, b = {"A.0.forward": shared}, {"B.0.forward": shared}
    for step in range(3):  # equal dicts, new each step (as flush hands them over)
        writer.write_json(step, None, {"dump.json": DUMP, "stack.json": dict(a)})
    writer.write_json(3, None, {"stack.json": dict(b)})
    writer.write_json(3, None, {"stack.json": dict(b)})  # a second set into the same folder: written again
    writer.drain()
    (tmp_path / "step3" / "rank" / "stack.json").unlink()  # the next link's source gone: written instead
    writer.write_json(4, None, {"stack.json": dict(b)})
    writer.write_json(5, None, {"stack.json": dict(b)})
    writer.close()
    paths = {step: tmp_path / f"step{step}" / "rank" / "stack.json" for step in (0, 1, 2, 4, 5)}
    assert {step: _load(path) for step, path in paths.items()} == {0: a, 1: a, 2: a, 4: b, 5: b}
    inode = {step: path.stat().st_ino for step, path in paths.items()}
    assert inode[0] == inode[1] == inode[2] and paths[0].stat().st_nlink == 3
    assert inode[4] == inode[5] != inode[0] and paths[4].stat().st_nlink == 2
    stack_sets = [obj for obj in encoded if "A.0.forward" in obj or "B.0.forward" in obj]
    assert stack_sets == [a, b, b]  # step 0's, and step 3's twice: every other text was the last one's
    assert sorted(p.name for p in (tmp_path / "step3" / "rank").iterdir()) == []  # no temporary file left
