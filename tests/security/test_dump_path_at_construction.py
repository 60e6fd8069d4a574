"""A bad dump_path stops PrecisionDebugger(...) of both frameworks at once, in one line (issue 11).

Before, each of these trained to the end with exit 0 and no dump, printing only runtime errors.
"""
import os
import stat

import pytest

from msprobe.core.errors import PathError


def _unwritable_folder(tmp_path):
    """A folder nothing can be created in: /sys refuses even root; others get a 0500 folder."""
    if os.geteuid() == 0:
        return "/sys"
    folder = tmp_path / "read_only"
    folder.mkdir(mode=0o500)
    return str(folder)


def _bad_dump_paths(tmp_path):
    (tmp_path / "a_file").write_text("not a folder")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    return {
        "a file": (str(tmp_path / "a_file"), "not a folder"),
        "unwritable": (os.path.join(_unwritable_folder(tmp_path), "dump"), "not writable"),
        "300 characters": (str(tmp_path / ("d" * 300)), "too long"),
        "shell metacharacters": (str(tmp_path / "dump;touch PWNED"), "special characters"),
        "command substitution": (str(tmp_path / "dump$(touch PWNED)"), "special characters"),
        "newline": (str(tmp_path / "dump\nx"), "special characters"),
        "symlink": (str(tmp_path / "link"), "symbolic link"),
    }


CASES = ["a file", "unwritable", "300 characters", "shell metacharacters", "command substitution", "newline",
         "symlink"]


@pytest.mark.parametrize("case", CASES)
def test_torch_precision_debugger_refuses_bad_dump_path(tmp_path, case):
    from msprobe.pytorch import PrecisionDebugger

    path, message = _bad_dump_paths(tmp_path)[case]
    with pytest.raises(PathError, match=message) as info:
        PrecisionDebugger(task="statistics", dump_path=path, level="L1")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("case", CASES)
def test_mindspore_precision_debugger_refuses_bad_dump_path(ms, tmp_path, case):
    from msprobe.mindspore import PrecisionDebugger

    path, message = _bad_dump_paths(tmp_path)[case]
    with pytest.raises(PathError, match=message) as info:
        PrecisionDebugger(task="statistics", dump_path=path, level="L1")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "PWNED").exists()


def test_config_file_dump_path_is_checked_too(tmp_path):
    import json

    from msprobe.pytorch import PrecisionDebugger

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "tensor", "dump_path": str(tmp_path / "out put"), "level": "L1"}))
    with pytest.raises(PathError, match="special characters"):
        PrecisionDebugger(config_path=str(config))


def test_good_dump_path_dumps_with_0750_folders_and_0640_files(tmp_path):
    import torch

    from msprobe.pytorch import PrecisionDebugger

    dump = tmp_path / "new" / "dump"
    debugger = PrecisionDebugger(task="tensor", dump_path=str(dump), level="L1")
    debugger.start()
    torch.nn.functional.relu(torch.ones(3) - 2)
    debugger.stop()
    debugger.close()
    folders = [dump.parent, dump, *[p for p in dump.rglob("*") if p.is_dir()]]
    files = [p for p in dump.rglob("*") if p.is_file()]
    assert len(folders) >= 5 and files  # new, dump, step0, rank, dump_tensor_data
    assert {str(p): oct(stat.S_IMODE(p.stat().st_mode)) for p in folders} == {str(p): "0o750" for p in folders}
    assert {str(p): oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {str(p): "0o640" for p in files}
