"""Compare opens files from other machines: a crafted .pt never runs code, unreadable tensor files are
reported row by row (never "all reached accuracy"), and absurd numbers in dump.json give one line."""
import json
import os
import pickle
import shutil
import struct
import zipfile

import pytest
import torch

from msprobe.cli import main
from msprobe.core.compare import CompareOptions, compare_dumps
from msprobe.core.compare.reasons import Reason
from msprobe.core.io.pt_reader import UnreadableTensorFile, read_pt
from msprobe.core.io.tensor_io import load_tensor

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


class _CreatesFile:
    """Unpickling this calls os.system('touch <marker>'): a file appears if anything runs it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def crafted_legacy_pt(path, marker, where="magic"):
    """A legacy-layout .pt whose header record (`where`='magic') or object pickle runs a command."""
    evil = pickle.dumps(_CreatesFile(marker), protocol=2)
    with open(path, "wb") as handle:
        if where == "magic":
            handle.write(evil)
            return path
        for record in (LEGACY_MAGIC, 1001, {"protocol_version": 1001, "little_endian": True}):
            handle.write(pickle.dumps(record, protocol=2))
        handle.write(evil)
        handle.write(pickle.dumps(["0"], protocol=2))
        handle.write(struct.pack("<q", 1) + struct.pack("<f", 1.0))
    return path


def crafted_zip_pt(path, marker):
    """A zip-layout .pt (what torch.save writes) whose data.pkl runs a command."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(_CreatesFile(marker), protocol=2))
        archive.writestr("archive/version", "3\n")
    return path


@pytest.mark.parametrize("layout", ["legacy magic", "legacy object", "zip"])
def test_crafted_pt_is_refused_without_running_it(tmp_path, layout):
    marker = tmp_path / "pwned"
    path = str(tmp_path / "evil.pt")
    if layout == "zip":
        crafted_zip_pt(path, marker)
    else:
        crafted_legacy_pt(path, marker, "magic" if layout == "legacy magic" else "object")
    with pytest.raises(UnreadableTensorFile, match="posix.system|os.system|refused"):
        read_pt(path)
    with pytest.raises(UnreadableTensorFile):
        load_tensor(path)  # our reader, then torch.load(weights_only=True): neither runs it
    assert not marker.exists()


def test_npy_object_array_is_refused(tmp_path):
    import numpy as np

    path = tmp_path / "object.npy"
    np.save(path, np.array([_CreatesFile(tmp_path / "pwned")], dtype=object), allow_pickle=True)
    with pytest.raises(UnreadableTensorFile, match="allow_pickle"):
        load_tensor(str(path))
    assert not (tmp_path / "pwned").exists()


def _tensor_dump_copy(dumps, name, tmp_path):
    target = tmp_path / name
    shutil.copytree(dumps[name], target)
    return target


def _first_tensor_file(rank_dir, needle=".forward.output.0.pt"):
    data = rank_dir / "dump_tensor_data"
    return data / sorted(f for f in os.listdir(data) if needle in f)[0]


@pytest.mark.parametrize("damage", ["crafted legacy", "crafted zip", "truncated", "not a tensor"])
def test_bad_tensor_file_is_marked_counted_and_never_passes(dumps, tmp_path, damage, capsys):
    npu = _tensor_dump_copy(dumps, "tensor_fp32", tmp_path)
    victim = _first_tensor_file(npu)
    marker = tmp_path / "pwned"
    if damage == "crafted legacy":
        crafted_legacy_pt(str(victim), marker, "object")
    elif damage == "crafted zip":
        crafted_zip_pt(str(victim), marker)
    elif damage == "truncated":
        victim.write_bytes(victim.read_bytes()[:40])
    else:
        torch.save({"not": "a tensor"}, str(victim))
    compare_json = tmp_path / "compare.json"
    compare_json.write_text(json.dumps({"npu_path": str(npu / "dump.json"),
                                        "bench_path": os.path.join(dumps["tensor_fp32"], "dump.json")}))
    out = tmp_path / "out"
    assert main(["-f", "pytorch", "compare", "-i", str(compare_json), "-o", str(out)]) == 0
    assert not marker.exists()
    outcome = compare_dumps(str(npu / "dump.json"), os.path.join(dumps["tensor_fp32"], "dump.json"),
                            str(tmp_path / "api"), CompareOptions(progress=False, timestamp="1"))[0]
    records, result = outcome.records, outcome.result
    row = result.columns["Data_name"].index(victim.name)
    assert records.reason[row] == Reason.NPU_UNREADABLE
    message = result.columns["Err_message"][row]
    assert victim.name in message and "cannot be read" in message and "not found" not in message
    assert result.columns["Suspicion"][row].startswith("not compared: ")
    assert int(records.unreadable().sum()) == 1
    with open(outcome.advisor_path) as handle:
        advice = handle.read()
    assert "All rows reached accuracy" not in advice
    assert "1 rows could not be compared" in advice and "not a pass" in advice
    printed = capsys.readouterr().out
    assert "1 unreadable" in printed and "could not be compared" in printed


def test_bench_file_unreadable_is_said_so(dumps, tmp_path):
    bench = _tensor_dump_copy(dumps, "tensor_fp32", tmp_path)
    victim = _first_tensor_file(bench)
    victim.write_bytes(b"garbage")
    outcome = compare_dumps(os.path.join(dumps["tensor_fp32"], "dump.json"), str(bench / "dump.json"),
                            str(tmp_path / "o"), CompareOptions(progress=False, timestamp="1"))[0]
    row = outcome.result.columns["Data_name"].index(victim.name)
    assert outcome.records.reason[row] == Reason.BENCH_UNREADABLE
    assert outcome.result.columns["Err_message"][row].startswith("Bench dump file: ")


@pytest.mark.parametrize("value", ["10" * 200, "1" + "0" * 5000])
def test_huge_integer_statistic_is_one_line_error(dumps, tmp_path, capsys, value):
    with open(os.path.join(dumps["stat_fp32"], "dump.json")) as handle:
        text = handle.read()
    entry = next(iter(json.loads(text)["data"]))
    data = json.loads(text)
    first = data["data"][entry]["input_args"][0]
    first["Max"] = 0  # placeholder, replaced by the huge literal below (json cannot hold it as a float)
    broken = json.dumps(data).replace('"Max": 0,', f'"Max": {value},', 1)
    path = tmp_path / "dump.json"
    path.write_text(broken)
    compare_json = tmp_path / "compare.json"
    compare_json.write_text(json.dumps({"npu_path": str(path),
                                        "bench_path": os.path.join(dumps["stat_fp32"], "dump.json")}))
    assert main(["-f", "pytorch", "compare", "-i", str(compare_json), "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr()
    lines = [line for line in (err.out + err.err).splitlines() if "[ERROR]" in line]
    assert len(lines) == 1 and "Traceback" not in err.out + err.err
    assert "dump.json" in lines[0]


def test_huge_integer_argument_value_is_compared_as_text(tmp_path):
    from msprobe.core.io.load import table_from_dump

    body = {"input_args": [{"type": "int", "value": 10 ** 400}], "output": []}
    table = table_from_dump({"task": "statistics", "data": {"Functional.f.0.forward": body}})
    assert table.columns["kind"] == ["text"] and table.columns["value"] == [str(10 ** 400)]
