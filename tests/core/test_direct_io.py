"""core/dump/direct_io.py: files written with O_DIRECT (or through the page cache) hold exactly the bytes
written, at every size around the block boundary; buffers come back from the pool."""
import os

import numpy as np
import pytest

from msprobe.core.dump import direct_io


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 * 4096, 100_003, 1 << 20])
@pytest.mark.parametrize("direct", [True, False])
def test_file_holds_exactly_what_was_written(tmp_path, monkeypatch, size, direct):
    monkeypatch.setattr(direct_io, "_enabled", direct)
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    path = tmp_path / "f.bin"
    with direct_io.DirectFile(str(path), size + 16) as handle:
        handle.write(b"head")
        if size:
            handle.write_from(data.ctypes.data, size)  # raw memory, as a tensor's storage is written
    assert path.read_bytes() == b"head" + data.tobytes()
    assert oct(path.stat().st_mode & 0o777) == "0o640"


def test_buffers_are_reused_and_large_ones_released():
    pool = direct_io._Pool()
    first = pool.take(10_000)
    pool.give(first)
    assert pool.take(20_000) is first  # same size class (64 KB): the same buffer, no fresh pages
    big = pool.take(direct_io._MAX_KEPT + 1)
    pool.give(big)
    assert pool.take(direct_io._MAX_KEPT + 1) is not big


def test_an_existing_file_is_replaced_not_appended(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 50_000)
    with direct_io.DirectFile(str(path), 10) as handle:
        handle.write(b"short")
    assert path.read_bytes() == b"short"
    assert os.path.getsize(path) == 5
