"""The reports' own zip writer: archives that zipfile and openpyxl read back, with ISA-L's deflate and zlib's,
and the zip64 records once a size or an offset outgrows the classic fields."""
import os
import shutil
import subprocess
import zipfile
import zlib

import openpyxl
import pytest
from isal import isal_zlib

from msprobe.core.io import zipwrite
from msprobe.core.io.xlsx import Sheet, write_xlsx
from msprobe.core.io.zipwrite import ZipWriter

MEMBERS = {"a.txt": b"hello " * 1000, "empty.xml": b"", "dir/b.bin": os.urandom(70000),
           "c.xml": "<r>\u00e9\u4e2d</r>".encode("utf-8") * 3000}


def _write(path, codec, streamed=("dir/b.bin",)):
    with ZipWriter(str(path), codec=codec) as archive:
        for name, data in MEMBERS.items():
            if name in streamed:
                with archive.open(name) as stream:
                    for start in range(0, len(data), 4096):  # streamed in pieces, as the sheets are
                        stream.write(data[start:start + 4096])
            else:
                archive.writestr(name, data)


@pytest.mark.parametrize("codec", [isal_zlib, zlib], ids=["isal", "zlib"])
def test_members_read_back_with_their_crc_and_sizes(tmp_path, codec):
    path = tmp_path / "m.zip"
    _write(path, codec)
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None  # every member's CRC checked
        assert archive.namelist() == list(MEMBERS)
        for info in archive.infolist():
            assert info.compress_type == zipfile.ZIP_DEFLATED
            assert info.file_size == len(MEMBERS[info.filename])
            assert archive.read(info.filename) == MEMBERS[info.filename]
            assert info.external_attr >> 16 == 0o600
    if shutil.which("unzip"):  # a second, independent reader
        listing = subprocess.run(["unzip", "-t", str(path)], capture_output=True, text=True, check=False)
        assert listing.returncode == 0 and "No errors detected" in listing.stdout


def test_isal_and_zlib_archives_hold_the_same_members(tmp_path):
    _write(tmp_path / "i.zip", isal_zlib)
    _write(tmp_path / "z.zip", zlib)
    with zipfile.ZipFile(tmp_path / "i.zip") as fast, zipfile.ZipFile(tmp_path / "z.zip") as plain:
        assert [fast.read(n) for n in MEMBERS] == [plain.read(n) for n in MEMBERS]
    assert zipwrite.default_codec() is isal_zlib  # the `fast` extra is installed here: reports use it


def test_zip64_records_are_written_past_the_classic_limits(tmp_path, monkeypatch):
    # past 4 GiB the writer must use the zip64 fields; the limits are lowered so that small members cross them
    monkeypatch.setattr(zipwrite, "_LIMIT32", 5000)
    monkeypatch.setattr(zipwrite, "_LIMIT16", 3)
    path = tmp_path / "big.zip"
    _write(path, zlib, streamed=tuple(MEMBERS))  # members that outgrow the fields are streamed (sizes reserved)
    raw = path.read_bytes()
    assert raw.count(b"PK\x06\x06") == 1 and raw.count(b"PK\x06\x07") == 1  # zip64 end record and locator
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None
        assert {i.filename: i.file_size for i in archive.infolist()} == {n: len(d) for n, d in MEMBERS.items()}
        assert archive.read("dir/b.bin") == MEMBERS["dir/b.bin"]


def test_a_member_written_whole_refuses_to_outgrow_the_classic_fields(tmp_path, monkeypatch):
    monkeypatch.setattr(zipwrite, "_LIMIT32", 100)
    with pytest.raises(ValueError, match="outgrew"):
        with ZipWriter(str(tmp_path / "x.zip"), codec=zlib) as archive:
            archive.writestr("x", os.urandom(1000))


def test_a_report_is_the_same_workbook_with_either_codec(tmp_path, monkeypatch):
    columns = [[f"Functional.linear.{i}.forward" for i in range(500)], [i / 7 for i in range(500)],
               ["N/A"] * 499 + ["Yes"]]
    sheet = Sheet("Sheet", ["Name", "Value", "Note"], columns, [0] * 499 + [2], freeze_header=True)
    write_xlsx(str(tmp_path / "fast.xlsx"), [sheet])
    monkeypatch.setattr(zipwrite, "_isal", None)
    assert zipwrite.default_codec() is zlib
    write_xlsx(str(tmp_path / "plain.xlsx"), [sheet])
    with zipfile.ZipFile(tmp_path / "fast.xlsx") as fast, zipfile.ZipFile(tmp_path / "plain.xlsx") as plain:
        assert fast.namelist() == plain.namelist()
        assert all(fast.read(name) == plain.read(name) for name in fast.namelist())
    book = openpyxl.load_workbook(tmp_path / "fast.xlsx")
    rows = [[c.value for c in row] for row in book["Sheet"].iter_rows()]
    assert rows[0] == ["Name", "Value", "Note"]
    assert rows[1:] == [[n, v, t] for n, v, t in zip(*columns)]
    assert oct(os.stat(tmp_path / "fast.xlsx").st_mode & 0o777) == "0o640"
