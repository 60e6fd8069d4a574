"""Pure functions of the MindSpore adapter: statistics, descriptors, CRC, kernel file names,
iteration syntax and the MindSpore -> PyTorch name mapping."""
import csv
import math
import os
import zlib

import numpy as np
import pytest

from msprobe.core.compare.ms_to_pt import map_api, ms_to_pt_entry_mapper
from msprobe.core.dump.array_stats import array_statistics
from msprobe.mindspore.dump.graph_dump import _io_mode, _iteration_text
from msprobe.core.dump.kernel_files import (kernel_files, parse_kernel_file_name, read_kernel_array,
                                            stat_header, write_statistics)


@pytest.mark.parametrize("array, expected", [
    (np.array([1.0, -2.0, 3.0], np.float32), [3.0, -2.0, 2.0 / 3, math.sqrt(14)]),
    (np.zeros((2, 2), np.float32), [0.0, 0.0, 0.0, 0.0]),
    (np.array([[1, 5], [-3, 0]], np.int64), [5, -3, 0.75, math.sqrt(35)]),
    (np.array([True, False]), [True, False, None, None]),
    (np.array([60000.0, 60000.0], np.float16), [60000.0, 60000.0, 60000.0, 60000.0 * math.sqrt(2)]),
])
def test_array_statistics_table(array, expected):
    got = array_statistics(array)
    for value, want in zip(got, expected):
        if want is None:
            assert value is None
        else:
            assert value == pytest.approx(want, rel=1e-6)
    assert type(got[0]) is type(expected[0])


def test_array_statistics_empty_nan_and_inf():
    assert array_statistics(np.zeros((0, 3), np.float32)) is None
    stats = array_statistics(np.array([1.0, np.nan], np.float32))
    assert all(math.isnan(v) for v in stats)
    stats = array_statistics(np.array([1.0, np.inf, -np.inf], np.float32))
    assert stats[0] == math.inf and stats[1] == -math.inf and math.isnan(stats[2]) and stats[3] == math.inf


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_array_statistics_kernel_and_numpy_paths_agree(monkeypatch, dtype):
    import msprobe.core.dump.array_stats as adapter_module

    array = (np.random.default_rng(7).standard_normal((300, 70)) * 4 - 1).astype(dtype)
    fast = array_statistics(array)
    monkeypatch.setattr(adapter_module, "float_stats", None)
    slow = array_statistics(array)
    assert fast[:2] == slow[:2] == [float(array.max()), float(array.min())]
    rel = 1e-6 if dtype == np.float32 else 1e-12
    assert fast[2] == pytest.approx(slow[2], rel=rel) and fast[3] == pytest.approx(slow[3], rel=rel)
    if dtype == np.float32:  # float32 statistics of a float32 tensor, as MindSpore's own reductions give
        assert float(np.float32(fast[2])) == fast[2] and float(np.float32(fast[3])) == fast[3]


def test_adapter_describes_bfloat16_and_md5(ms):
    from mindspore import Tensor
    from msprobe.mindspore.dump.adapter import get_adapter
    adapter = get_adapter()
    values = np.array([[1.5, -2.0], [0.25, 4.0]], np.float32)
    bf16 = Tensor(values).astype(ms.bfloat16)
    assert adapter.tensor_header(bf16) == {"type": "mindspore.Tensor", "dtype": "BFloat16", "shape": [2, 2]}
    assert adapter.tensor_stats(bf16)[:2] == (4.0, -2.0)  # exact in bf16
    assert adapter.crc32(Tensor(values)) == f"{zlib.crc32(values.tobytes()):08x}"
    import torch
    torch_bf16 = torch.tensor(values).bfloat16().view(torch.uint8).numpy()
    assert adapter.crc32(bf16) == f"{zlib.crc32(torch_bf16.tobytes()):08x}"  # same bits, same CRC
    assert adapter.describe_other(ms.float16) == {"type": "mindspore.dtype", "value": "Float16"}
    assert adapter.is_tensor(ms.Parameter(Tensor(values), name="p")) and not adapter.is_tensor(values)


def test_kernel_file_name_parsing():
    meta = parse_kernel_file_name("MatMul.Default_fc-Dense_MatMul-op0.0.0.1795338326103014.input.1."
                                  "DefaultFormat.Float32.npy")
    assert meta == {"op_type": "MatMul", "op_name": "Default_fc-Dense_MatMul-op0", "task_id": "0",
                    "stream_id": "0", "timestamp": "1795338326103014", "io": "input", "slot": "1",
                    "format": "DefaultFormat", "dtype": "Float32"}
    dotted = parse_kernel_file_name("Cast.a.b.c.1.2.3.output.0.ND.BF16.npy")
    assert dotted["op_name"] == "a.b.c" and dotted["io"] == "output"
    assert parse_kernel_file_name("statistic.csv") is None
    assert parse_kernel_file_name("mapping.csv") is None


def _write_bf16_npy(path, values, shape):
    """A .npy file as MindSpore writes bfloat16: descriptor '<E2', then the 16-bit patterns."""
    bits = (np.asarray(values, np.float32).view(np.uint32) >> 16).astype("<u2")
    header = repr({"descr": "<E2", "fortran_order": False, "shape": tuple(shape)}).encode("latin1")
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    with open(path, "wb") as handle:
        handle.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bits.tobytes())
    return bits


def test_bfloat16_npy_is_read_as_float32_with_its_bits_kept(tmp_path):
    from msprobe.core.errors import ParseError
    path = str(tmp_path / "x.npy")
    bits = _write_bf16_npy(path, [1.5, -2.0, 0.25, 4.0, 0.0, -0.5], (2, 3))
    with pytest.raises(ValueError):
        np.load(path)  # what a plain reader gets
    values, stored = read_kernel_array(path)
    assert values.dtype == np.float32 and values.shape == (2, 3)
    np.testing.assert_array_equal(values, [[1.5, -2.0, 0.25], [4.0, 0.0, -0.5]])
    np.testing.assert_array_equal(stored.reshape(-1), bits)
    plain = str(tmp_path / "y.npy")
    np.save(plain, np.arange(4, dtype=np.int32))
    values, stored = read_kernel_array(plain)
    assert values is stored and values.dtype == np.int32
    with open(path, "rb") as handle:
        content = handle.read()
    with open(path, "wb") as handle:
        handle.write(content[:-4])  # two values short
    with pytest.raises(ParseError, match="truncated"):
        read_kernel_array(path)
    (tmp_path / "z.npy").write_bytes(b"raw bytes of a bin dump")
    with pytest.raises(ParseError, match="not a .npy file"):
        read_kernel_array(str(tmp_path / "z.npy"))


def test_mapping_csv_names_renamed_files_and_statistics_use_them(tmp_path):
    long_name = "MatMul." + "Default_" + "x" * 250 + "_MatMul-op0.0.0.17.input.1.DefaultFormat.Float32.npy"
    np.save(str(tmp_path / "12345.npy"), np.array([3.0, -4.0], np.float32))
    np.save(str(tmp_path / "ReLU.Default_ReLU-op0.0.0.18.output.0.DefaultFormat.Float32.npy"), np.ones(2, np.float32))
    _write_bf16_npy(str(tmp_path / "Cast.Default_Cast-op0.0.0.19.output.0.DefaultFormat.BFloat16.npy"),
                    [2.0, 0.5], (2,))
    (tmp_path / "mapping.csv").write_text(f"12345.npy,{long_name}\n")
    found = {meta["op_type"]: (path, meta) for path, meta in kernel_files(str(tmp_path))}
    assert set(found) == {"MatMul", "ReLU", "Cast"}
    assert found["MatMul"][0].endswith("12345.npy")
    assert found["MatMul"][1]["op_name"] == "Default_" + "x" * 250 + "_MatMul-op0"
    assert write_statistics(str(tmp_path), want_md5=True, items=["max", "l2norm"]) == 3
    assert sorted(os.listdir(str(tmp_path))) == ["statistic.csv"]
    with open(str(tmp_path / "statistic.csv")) as handle:
        rows = {r["Op Type"]: r for r in csv.DictReader(handle)}
    assert list(rows["MatMul"]) == stat_header(["max", "l2norm"], want_md5=True)
    assert float(rows["MatMul"]["Max Value"]) == 3.0 and float(rows["MatMul"]["L2Norm Value"]) == 5.0
    assert rows["Cast"]["Data Size"] == "4" and float(rows["Cast"]["L2Norm Value"]) == pytest.approx(math.sqrt(4.25))
    assert rows["Cast"]["MD5"] == f"{zlib.crc32(np.array([0x4000, 0x3f00], '<u2').tobytes()):08x}"


def test_stat_header_items():
    assert stat_header() == ["Op Type", "Op Name", "Task ID", "Stream ID", "Timestamp", "IO", "Slot", "Data Size",
                             "Data Type", "Shape", "Max Value", "Min Value", "Avg Value", "Count", "L2Norm Value"]
    assert stat_header(["min", "mean"], want_md5=True)[-4:] == ["Min Value", "Avg Value", "Count", "MD5"]


def test_iteration_syntax_and_io_mode():
    from msprobe.core.errors import ConfigError
    assert _iteration_text([]) == "all"
    assert _iteration_text([0, 2, 3, 4, 7]) == "0|2-4|7"
    assert _io_mode(["all"]) == 0 and _io_mode(["input"]) == 1 and _io_mode(["output"]) == 2
    with pytest.raises(ConfigError, match="L2 kernel dump"):
        _io_mode(["forward"])


@pytest.mark.parametrize("entry, expected", [
    ("Mint.add.0.forward", "Torch.add.0.forward"),
    ("MintFunctional.gelu.3.backward", "Functional.gelu.3.backward"),
    ("Functional.dense.0.forward", "Functional.linear.0.forward"),
    ("Functional.abs.1.forward", "Torch.abs.1.forward"),
    ("Tensor.__add__.2.forward", "Tensor.__add__.2.forward"),
    ("Primitive.dense.Dense.4.backward", "Functional.linear.4.backward"),
    ("Primitive.add.Add.0.forward", "Primitive.add.Add.0.forward"),
    ("Mint.special.expm1.2.forward", "Torch.special.expm1.2.forward"),
    ("Mint.linalg.vector_norm.0.backward", "Torch.linalg.vector_norm.0.backward"),
    ("Jit.scaled_sum.0.forward", "Jit.scaled_sum.0.forward"),
    ("Distributed.all_reduce.1.forward", "Distributed.all_reduce.1.forward"),
    ("Cell.fc.Dense.forward.0", "Module.fc.Dense.forward.0"),
    ("Cell.fc.Dense.parameters_grad", "Module.fc.Dense.parameters_grad"),
])
def test_ms_to_pt_entry_mapper(entry, expected):
    assert ms_to_pt_entry_mapper(api_defaults=True, cells_to_modules=True)(entry) == expected


def test_mapper_options():
    assert ms_to_pt_entry_mapper(False, False) is None
    api_only = ms_to_pt_entry_mapper(api_defaults=True, cells_to_modules=False)
    assert api_only("Cell.fc.Dense.forward.0") == "Cell.fc.Dense.forward.0"
    cells_only = ms_to_pt_entry_mapper(api_defaults=False, cells_to_modules=True)
    assert cells_only("Mint.add.0.forward") == "Mint.add.0.forward"
    assert map_api("Jit.fn") == "Jit.fn"


def test_compare_command_imports_neither_framework():
    """MindSpore-only machines have no torch; compare must not need MindSpore's slow import either."""
    import subprocess
    import sys
    code = ("import sys, msprobe.mindspore, msprobe.mindspore.commands.compare, "
            "msprobe.mindspore.compare.kernel_compare; print('torch' in sys.modules, 'mindspore' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "False"], done.stderr
