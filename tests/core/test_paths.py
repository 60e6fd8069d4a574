"""Path safety checks and atomic writes."""
import json
import os
import stat

import pytest

from msprobe.core.errors import ParseError, PathError
from msprobe.core.paths import atomic_write_json, check_path, load_json, make_dir, safe_name


def test_special_characters_are_rejected(tmp_path):
    with pytest.raises(PathError, match="special characters"):
        check_path(str(tmp_path / "a;rm -rf"), must_exist=False, what="dump_path")


def test_symlink_rejected_unless_allowed(tmp_path):
    target = tmp_path / "real"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(PathError, match="symbolic link"):
        check_path(str(link))
    assert check_path(str(link), allow_symlink=True) == str(link)


def test_missing_and_wrong_kind(tmp_path):
    with pytest.raises(PathError, match="does not exist"):
        check_path(str(tmp_path / "nope"), what="-i")
    with pytest.raises(PathError, match="not a file"):
        check_path(str(tmp_path), kind="file")


def test_make_dir_and_atomic_write_permissions(tmp_path):
    directory = make_dir(str(tmp_path / "out" / "step0"))
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o750
    path = os.path.join(directory, "dump.json")
    atomic_write_json(path, {"a": [1, 2]})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert load_json(path) == {"a": [1, 2]}
    assert not [f for f in os.listdir(directory) if f.startswith(".tmp_")]


def test_truncated_json_names_the_file(tmp_path):
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"data": {"x": 1}})[:-3])
    with pytest.raises(ParseError, match="dump.json"):
        load_json(str(path))


def test_safe_name():
    assert safe_name("Module.a/b c") == "Module.a_b_c"
