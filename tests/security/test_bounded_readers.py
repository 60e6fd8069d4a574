"""Readers bounded by what they build: small hostile files that used to expand into gigabytes are refused (or
their bad item skipped) in one line, each reader's peak memory measured in a child process and held under 1 GB.

Every hostile input runs in a fresh child (`_measured`): a wrapper process runs the reader as its only child
and reports getrusage(RUSAGE_CHILDREN).ru_maxrss, the reader's own peak resident set.
"""
import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

ENV = dict(os.environ, MSPROBE_NO_PROGRESS="1", OMP_NUM_THREADS="1")
LIMIT_KB = 1024 * 1024  # 1 GB
_WRAPPER = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], timeout=150); "
            "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
            "sys.exit(done.returncode)")


def _measured(args, timeout=170):
    """(exit status, output lines without the PEAK line, the reader's peak RSS in KB)."""
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    peak = [int(line.split()[1]) for line in lines if line.startswith("PEAK_KB ")]
    assert peak, lines[-20:]
    return done.returncode, [line for line in lines if not line.startswith("PEAK_KB ")], peak[0]


def _cli(*args):
    return [sys.executable, "-m", "msprobe.cli", *map(str, args)]


def _only_error(lines, *words):
    errors = [line for line in lines if "[ERROR]" in line]
    assert len(errors) == 1 and all(word in errors[0] for word in words), lines[-10:]
    assert not any("Traceback" in line for line in lines), lines[-20:]
    return errors[0]


def _shared_dicts(depth):
    value = {"w": torch.zeros(1)}
    for _ in range(depth):
        value = {"a": value, "b": value}
    return value


def test_ckpt_of_shared_dicts_20_deep_is_refused_by_its_node_budget(tmp_path):
    bomb = tmp_path / "bomb.pt"
    torch.save(_shared_dicts(20), bomb)
    assert bomb.stat().st_size < 4096  # 2^20 leaves once the references are expanded
    torch.save({"w": torch.zeros(1)}, tmp_path / "ok.pt")
    rc, lines, peak = _measured(_cli("-f", "pytorch", "ckpt_compare", "--ckpt1", bomb, "--ckpt2",
                                     tmp_path / "ok.pt", "-o", tmp_path / "out"))
    assert rc == 1
    _only_error(lines, str(bomb), "nodes visited", "budget")
    assert peak < LIMIT_KB, peak
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


def test_ckpt_with_shared_dicts_a_few_deep_is_still_read_in_full(tmp_path):
    """Sharing is not refused as such: 2^6 leaves of a shared tensor are 64 keys, each compared."""
    torch.save(_shared_dicts(6), tmp_path / "a.pt")
    torch.save(_shared_dicts(6), tmp_path / "b.pt")
    from msprobe.core.ckpt_compare.compare import compare_checkpoints
    from msprobe.pytorch.ckpt_reader import open_torch_checkpoint

    result = compare_checkpoints(str(tmp_path / "a.pt"), str(tmp_path / "b.pt"), str(tmp_path / "out"),
                                 openers=(open_torch_checkpoint,))
    assert result.summary["pairs"] == 64 and result.summary["counts"] == {"equal": 64}


def test_ckpt_zero_stride_tensor_is_skipped_before_any_copy(tmp_path):
    torch.save({"big": torch.zeros(1).expand(20000, 20000), "w": torch.arange(4.0)}, tmp_path / "a.pt")
    torch.save({"big": torch.zeros(3), "w": torch.arange(4.0)}, tmp_path / "b.pt")
    assert (tmp_path / "a.pt").stat().st_size < 4096
    rc, lines, peak = _measured(_cli("-f", "pytorch", "ckpt_compare", "--ckpt1", tmp_path / "a.pt", "--ckpt2",
                                     tmp_path / "b.pt", "-o", tmp_path / "out"))
    assert rc == 0, lines[-10:]
    warned = [line for line in lines if "[WARNING]" in line]
    assert len(warned) == 1 and "'big' is skipped" in warned[0] and "400000000 elements from 1" in warned[0]
    assert peak < LIMIT_KB, peak
    report = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    rows = {row["key1"]: row for row in report["parameters"]}
    assert rows["w"]["status"] == "equal" and rows["big"]["status"] == "value differs"
    assert rows["big"]["shape1"] == [20000, 20000]


def test_ckpt_sparse_and_quantized_tensors_are_skipped_with_a_warning(tmp_path):
    sparse = torch.eye(3).to_sparse()
    quantized = torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8)
    torch.save({"s": sparse, "q": quantized, "w": torch.ones(2)}, tmp_path / "a.pt")
    torch.save({"s": torch.eye(3), "q": torch.ones(4), "w": torch.ones(2)}, tmp_path / "b.pt")
    rc, lines, _ = _measured(_cli("-f", "pytorch", "ckpt_compare", "--ckpt1", tmp_path / "a.pt", "--ckpt2",
                                  tmp_path / "b.pt", "-o", tmp_path / "out"))
    assert rc == 0, lines[-10:]
    warned = " ".join(line for line in lines if "[WARNING]" in line)
    assert "'s' is skipped: a sparse_coo tensor" in warned and "'q' is skipped: a quantized tensor" in warned
    report = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert {row["key1"]: row["status"] for row in report["parameters"]}["w"] == "equal"


def test_mindspore_ckpt_declaring_more_bytes_than_it_holds_is_refused(tmp_path):
    from mindspore.train.checkpoint_pb2 import Checkpoint

    proto = Checkpoint()
    value = proto.value.add()
    value.tag = "w"
    value.tensor.dims.extend([20000, 20000])
    value.tensor.tensor_type = "Float32"
    value.tensor.tensor_content = b"\0" * 4
    bomb = tmp_path / "bomb.ckpt"
    bomb.write_bytes(proto.SerializeToString())
    assert bomb.stat().st_size == 30
    ok = Checkpoint()
    value = ok.value.add()
    value.tag = "w"
    value.tensor.dims.extend([1])
    value.tensor.tensor_type = "Float32"
    value.tensor.tensor_content = b"\0" * 4
    (tmp_path / "ok.ckpt").write_bytes(ok.SerializeToString())
    rc, lines, peak = _measured(_cli("-f", "mindspore", "ckpt_compare", "--ckpt1", bomb, "--ckpt2",
                                     tmp_path / "ok.ckpt", "-o", tmp_path / "out"))
    assert rc == 1
    _only_error(lines, str(bomb), "'w'", "needs 1,600,000,000 bytes but 4 are stored")
    assert peak < LIMIT_KB, peak


def test_mindspore_ckpt_split_over_records_is_read_whole(tmp_path):
    """MindSpore writes a large parameter as several records of one tag: their bytes together match its dims."""
    from mindspore.train.checkpoint_pb2 import Checkpoint

    from msprobe.mindspore.ckpt_reader import check_declared_sizes

    data = np.arange(6, dtype=np.float32).tobytes()
    proto = Checkpoint()
    for start in (0, 8, 16):
        value = proto.value.add()
        value.tag = "w"
        value.tensor.dims.extend([2, 3])
        value.tensor.tensor_type = "Float32"
        value.tensor.tensor_content = data[start:start + 8]
    (tmp_path / "split.ckpt").write_bytes(proto.SerializeToString())
    check_declared_sizes(str(tmp_path / "split.ckpt"))  # no error
    import mindspore as ms

    assert ms.load_checkpoint(str(tmp_path / "split.ckpt"))["w"].asnumpy().tolist() == [[0, 1, 2], [3, 4, 5]]


def _safetensors(path, header, data=b""):
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)
    return path


WRAPS = [4294967297, 4294967295, 4294967297, 4294967295]  # the product is 1 modulo 2^64


@pytest.mark.parametrize("entry, reason", [
    ({"dtype": "F32", "shape": WRAPS, "data_offsets": [0, 4]}, "points outside the file or does not match"),
    ({"dtype": "F32", "shape": [10 ** 30], "data_offsets": [0, 4]}, "points outside the file or does not match"),
    ({"dtype": "F32", "shape": [1], "data_offsets": [0.0, 4.0]}, "data_offsets that are not integers"),
    ({"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}, "data_offsets that are not integers"),
    ({"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}, "malformed dtype, shape or data_offsets"),
])
def test_safetensors_entries_checked_in_exact_integers(tmp_path, entry, reason):
    bad = _safetensors(tmp_path / "bad.safetensors", {"bad": entry, "w": {"dtype": "F32", "shape": [1],
                                                                          "data_offsets": [4, 8]}},
                       np.array([7.0, 1.0], dtype=np.float32).tobytes())
    from msprobe.core.ckpt_compare.readers import SafetensorsReader

    reader = SafetensorsReader(str(bad))
    assert reader.keys() == ["w"] and reader.read("w").raw.tolist() == [1.0]  # the rest is reported
    only = _safetensors(tmp_path / "only.safetensors", {"bad": entry}, b"\0" * 4)
    torch.save({"w": torch.zeros(1)}, tmp_path / "ok.pt")
    rc, lines, peak = _measured(_cli("-f", "pytorch", "ckpt_compare", "--ckpt1", only, "--ckpt2",
                                     tmp_path / "ok.pt", "-o", tmp_path / "out"))
    assert rc == 1
    _only_error(lines, str(only), "'bad'", reason)
    assert peak < LIMIT_KB, peak


def test_safetensors_header_100000_deep_is_one_line(tmp_path):
    deep = b"[" * 100000 + b"]" * 100000
    path = tmp_path / "deep.safetensors"
    path.write_bytes(len(deep).to_bytes(8, "little") + deep)
    torch.save({"w": torch.zeros(1)}, tmp_path / "ok.pt")
    rc, lines, _ = _measured(_cli("-f", "pytorch", "ckpt_compare", "--ckpt1", path, "--ckpt2", tmp_path / "ok.pt",
                                  "-o", tmp_path / "out"))
    assert rc == 1
    _only_error(lines, str(path), "nested too deeply")


def test_sharded_index_key_missing_from_its_shard_is_skipped(tmp_path):
    from safetensors.torch import save_file

    for side in ("a", "b"):
        folder = tmp_path / side
        folder.mkdir()
        save_file({"w": torch.ones(2)}, str(folder / "s1.safetensors"))
        (folder / "model.safetensors.index.json").write_text(json.dumps(
            {"weight_map": {"w": "s1.safetensors", "ghost": "s1.safetensors"}}))
    rc, lines, _ = _measured(_cli("-f", "pytorch", "ckpt_compare", "--ckpt1", tmp_path / "a", "--ckpt2",
                                  tmp_path / "b", "-o", tmp_path / "out"))
    assert rc == 0, lines[-10:]
    assert any("'ghost' is not in its shard s1.safetensors" in line for line in lines if "[WARNING]" in line)
    report = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert {row["key1"]: row["status"] for row in report["parameters"]}["w"] == "equal"


# ---- config_check packs and YAML ----

def _pack(path, **replaced):
    """A real pack (ConfigChecker, no model) with some of its members replaced by raw bytes."""
    from msprobe.core.config_check.pack import ConfigChecker

    ConfigChecker(output_zip_path=str(path), fmk="pytorch")
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members.update({f"{name}.json": data for name, data in replaced.items()})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    path.write_bytes(buffer.getvalue())
    return path


def test_config_check_pack_of_30mb_of_empty_objects_is_refused_before_parsing(tmp_path):
    bomb = _pack(tmp_path / "bomb.zip", framework=b"[" + b"{}, " * (7_500_000) + b"{}]")
    assert bomb.stat().st_size < 256 * 1024
    a = _pack(tmp_path / "a.zip")
    rc, lines, peak = _measured(_cli("-f", "pytorch", "config_check", "-c", a, bomb, "-o", tmp_path / "out"))
    assert rc == 1
    _only_error(lines, str(bomb), "nodes visited", "budget")
    assert peak < LIMIT_KB, peak


def test_config_check_yaml_alias_bomb_is_refused(tmp_path):
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        lines.append(f"a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * 9) + "]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    assert bomb.stat().st_size < 1024  # 9^9 strings once the aliases are expanded
    script = ("from msprobe.core.config_check.pack import ConfigChecker\n"
              "from msprobe.core.errors import MsprobeError\n"
              "import sys\n"
              "try:\n"
              f"    ConfigChecker(yaml_path=[{str(bomb)!r}], output_zip_path={str(tmp_path / 'p.zip')!r})\n"
              "except MsprobeError as exc:\n"
              "    print('[ERROR]', exc)\n"
              "    sys.exit(1)\n")
    rc, out, peak = _measured([sys.executable, "-c", script])
    assert rc == 1
    _only_error(out, str(bomb), "nodes visited")
    assert peak < LIMIT_KB, peak
    assert not (tmp_path / "p.zip").exists()


@pytest.mark.parametrize("method", ["encrypted", "method99"])
def test_config_check_unreadable_zip_member_is_one_line(tmp_path, method, capsys):
    pack = _pack(tmp_path / "p.zip")
    data = bytearray(pack.read_bytes())
    with zipfile.ZipFile(pack) as archive:
        info = archive.getinfo("framework.json")
    local = info.header_offset
    central = data.find(b"framework.json", data.find(b"PK\x01\x02")) - 46  # the member's central directory record
    for at in (local, central):
        flag_at = at + (6 if at == local else 8)
        if method == "encrypted":
            data[flag_at] |= 1
        else:
            data[flag_at + 2:flag_at + 4] = (99).to_bytes(2, "little")
    (tmp_path / "bad.zip").write_bytes(bytes(data))
    from msprobe.cli import main

    assert main(["-f", "pytorch", "config_check", "-c", str(pack), str(tmp_path / "bad.zip"), "-o",
                 str(tmp_path / "out")]) == 1
    err = capsys.readouterr()
    _only_error((err.out + err.err).splitlines(), str(tmp_path / "bad.zip"), "cannot be read")


def test_config_check_malformed_items_are_skipped_and_the_rest_compared(tmp_path, capsys):
    a = _pack(tmp_path / "a.zip", weights=json.dumps({"w1": {"shape": [2], "dtype": "float32", "sha256": "aa"},
                                                      "w2": {"shape": [2], "dtype": "float32", "sha256": "bb"}}),
              environment=json.dumps({"LR": "1", "X": "1"}))
    b = _pack(tmp_path / "b.zip",
              weights=json.dumps({"w1": 5, "w2": {"shape": [2], "dtype": "float32", "sha256": "cc"}}),
              dataset=json.dumps({"recorded": True, "batches": [{"sha256": 3}, "x"]}),
              random=json.dumps({"recorded": True, "seeds": [{"api": "seed", "args": 5, "kwargs": {}}],
                                 "draws": {"torch.rand": "x"}}),
              environment='{"LR": "2", "\\ud800X": "1"}')
    from msprobe.cli import main

    assert main(["-f", "pytorch", "config_check", "-c", str(a), str(b), "-o", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr()
    text = printed.out + printed.err
    for what in ("weights item 'w1'", "dataset batch item '0'", "dataset batch item '1'",
                 "random seed call item '0'", "random draws item 'torch.rand'", "environment item '\\ud800X'"):
        assert what in text, (what, text[-3000:])
    report = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    items = {(d["check"], d["item"]) for d in report["differences"]}
    assert ("weights", "w2") in items and ("environment", "LR") in items and ("weights", "w1") in items


def test_config_check_report_over_its_output_budget_is_refused(tmp_path, monkeypatch):
    from msprobe.core.bounded_walk import Budget, OverBudget
    from msprobe.core.config_check import compare

    env = {f"V{n}": "x" * 200 for n in range(200)}
    a = _pack(tmp_path / "a.zip", environment=json.dumps(env))
    b = _pack(tmp_path / "b.zip", environment=json.dumps({k: "y" for k in env}))
    monkeypatch.setattr(compare, "PACK_BUDGET", Budget(nodes=100_000, elements=1000, output_bytes=20_000))
    with pytest.raises(OverBudget, match="20,000 output bytes"):
        compare.compare_packs(str(a), str(b), str(tmp_path / "out"))


def test_load_json_counts_values_before_parsing(tmp_path):
    from msprobe.core.bounded_walk import Budget, OverBudget, loads_json
    from msprobe.core.paths import load_json

    (tmp_path / "many.json").write_text("[" + "{}," * 999 + "{}]")
    with pytest.raises(OverBudget, match="many.json.*500 nodes visited"):
        load_json(str(tmp_path / "many.json"), budget=Budget(nodes=500))
    assert len(load_json(str(tmp_path / "many.json"), budget=Budget(nodes=5000))) == 1000
    # separators inside strings are not values
    assert loads_json(json.dumps({"k": ",:[{" * 1000}), "text", Budget(nodes=10)) == {"k": ",:[{" * 1000}


def test_tensor_bytes_is_exact():
    from msprobe.core.bounded_walk import tensor_bytes

    assert tensor_bytes(WRAPS, 4) == 4 * ((2 ** 64 - 1) ** 2)
    assert tensor_bytes([], 8) == 8
    with pytest.raises(ValueError):
        tensor_bytes([True], 1)
    with pytest.raises(ValueError):
        tensor_bytes([-1], 1)
