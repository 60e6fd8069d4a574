"""Crafted `.pt` layouts and parse's `.txt` outputs: negative strides or offsets are refused (they made numpy
read the process heap, or segfault), zero strides cannot multiply a few bytes into gigabytes, and a partial
or planted `.txt` is never taken for a finished one.

Readers run in child processes: before these checks a crafted file could crash the interpreter."""
import collections
import io
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

ENV = dict(os.environ, MSPROBE_NO_PROGRESS="1", OMP_NUM_THREADS="1")


class _Storage:
    """Stands for the storage in the pickle: a persistent id, as torch.save writes it."""


class _Recipe:
    def __init__(self, offset, size, stride):
        self.args = (_Storage(), offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


def crafted_pt(path, values, offset, size, stride):
    """A zip `.pt` holding float32 `values` as the storage and the given layout, as torch.save lays it out."""
    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _Storage):
                return ("storage", torch.FloatStorage, "0", "cpu", len(values))
            return None
    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump(_Recipe(offset, size, stride))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/data/0", np.asarray(values, dtype="<f4").tobytes())
        archive.writestr("archive/version", "3\n")
    return str(path)


READERS = """
import sys
from msprobe.core.io.tensor_io import load_tensor, UnreadableTensorFile
from msprobe.core.errors import MsprobeError
from msprobe.core.parse.tensor_file import read_tensor_file
for path in sys.argv[1:]:
    try:
        print("compare READ", load_tensor(path).tolist())
    except UnreadableTensorFile as exc:
        print("compare REFUSED", exc)
    try:
        print("parse READ", read_tensor_file(path).array.tolist())
    except MsprobeError as exc:
        print("parse REFUSED", exc)
"""


@pytest.mark.parametrize("offset, size, stride", [
    (0, [4], [-1]),           # reads 3 elements before the storage
    (3, [4], [-1]),           # stays inside, but a negative stride is refused all the same
    (-4, [2], [1]),           # a negative storage offset
    (0, [2, 2], [2, -1]),
])
def test_negative_strides_and_offsets_are_refused_by_compare_and_parse(tmp_path, offset, size, stride):
    path = crafted_pt(tmp_path / "t.pt", [1.0, 2.0, 3.0, 4.0], offset, size, stride)
    done = subprocess.run([sys.executable, "-c", READERS, path], capture_output=True, text=True, timeout=120, env=ENV)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(" REFUSED " in line and "negative" in line for line in lines), lines


def test_zero_strides_are_refused_by_compare_and_parse_before_any_copy(tmp_path):
    path = crafted_pt(tmp_path / "t.pt", [1.0, 2.0, 3.0, 4.0], 0, [1000, 1000], [0, 0])
    done = subprocess.run([sys.executable, "-c", READERS, path], capture_output=True, text=True, timeout=120, env=ENV)
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(" REFUSED " in line and "1000000 elements from 4 stored" in line for line in lines)


def test_a_legitimate_transposed_file_still_reads(tmp_path):
    path = crafted_pt(tmp_path / "t.pt", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 0, [3, 2], [1, 3])
    done = subprocess.run([sys.executable, "-c", READERS, path], capture_output=True, text=True, timeout=120, env=ENV)
    expected = str([[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]])
    assert done.stdout.splitlines() == [f"compare READ {expected}", f"parse READ {expected}"], done.stderr[-2000:]


def _parse(lines, cwd):
    """(exit code, output, peak memory in bytes of the parse process)."""
    script = ("import resource, subprocess, sys\n"
              "done = subprocess.run([sys.executable, '-m', 'msprobe.cli', '-f', 'pytorch', 'parse'], input=sys.argv[1],"
              " capture_output=True, text=True, timeout=300)\n"
              "print(done.stdout + done.stderr)\n"
              "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
              "sys.exit(done.returncode)\n")
    done = subprocess.run([sys.executable, "-c", script, "".join(f"{line}\n" for line in lines)], capture_output=True,
                          text=True, timeout=400, cwd=cwd, env=ENV)
    text = done.stdout
    peak = int(text.rsplit("MAXRSS", 1)[1]) * 1024
    return done.returncode, text.rsplit("MAXRSS", 1)[0], peak


def test_zero_strides_in_a_small_pt_cost_parse_no_memory_and_leave_no_txt(tmp_path):
    path = tmp_path / "expanded.pt"
    torch.save(torch.ones(1).expand(8192, 8192), path)  # 64 Mi elements over one stored float
    assert os.path.getsize(path) < 2000
    code, text, peak = _parse([f"pt -n {path}", f"cn -m {path} -g {path} -s"], str(tmp_path))
    assert code == 0 and "Traceback" not in text
    errors = [line for line in text.splitlines() if "[ERROR]" in line]
    assert len(errors) == 2 and all("repeats storage elements" in line for line in errors), text
    assert not os.path.exists(f"{path}.txt")
    assert peak < 600 << 20, peak  # one float64 copy of the expanded tensor alone is 512 MiB


def test_run_ut_refuses_a_zero_stride_real_data_file(tmp_path):
    from msprobe.core.errors import UnsupportedError
    from msprobe.pytorch.api_accuracy_checker.arguments import _load_tensor

    torch.save(torch.ones(1).expand(4096, 4096), tmp_path / "x.pt")
    with pytest.raises(UnsupportedError, match="repeats storage elements"):
        _load_tensor({"data_name": "x.pt"}, str(tmp_path))
    torch.save(torch.arange(6.0).reshape(2, 3).t(), tmp_path / "y.pt")  # a view: its storage holds every element
    assert torch.equal(_load_tensor({"data_name": "y.pt"}, str(tmp_path)), torch.arange(6.0).reshape(2, 3).t())


def test_a_partial_txt_from_a_killed_run_is_rewritten_not_reused(tmp_path):
    values = np.arange(1000, dtype=np.float32) / 7
    path = tmp_path / "v.npy"
    np.save(path, values)
    (tmp_path / "v.npy.txt").write_text("# partial\n0\n0.142857149\n0.28")  # what a killed run leaves
    code, text, _ = _parse([f"pt -n {path}"], str(tmp_path))
    assert code == 0 and "[ERROR]" not in text
    np.testing.assert_allclose(np.loadtxt(tmp_path / "v.npy.txt"), values, rtol=1e-7)
    stamp = os.stat(tmp_path / "v.npy.txt").st_mtime_ns
    assert oct(os.stat(tmp_path / "v.npy.txt").st_mode & 0o777) == "0o640"
    code, text, _ = _parse([f"pt -n {path}"], str(tmp_path))  # a complete one is kept
    assert code == 0 and os.stat(tmp_path / "v.npy.txt").st_mtime_ns == stamp


def test_a_dangling_txt_symlink_is_one_clean_error_line_and_nothing_is_created(tmp_path):
    path = tmp_path / "v.npy"
    np.save(path, np.ones(3, dtype=np.float32))
    target = tmp_path / "elsewhere" / "planted.txt"
    os.symlink(target, tmp_path / "v.npy.txt")
    code, text, _ = _parse([f"pt -n {path}"], str(tmp_path))
    errors = [line for line in text.splitlines() if "[ERROR]" in line]
    assert code == 0 and len(errors) == 1 and "symbolic link" in errors[0], text
    assert "FileExistsError" not in text and "Traceback" not in text
    assert not target.exists() and not (tmp_path / "elsewhere").exists()
