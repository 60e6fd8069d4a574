"""Path safety checks and atomic writes."""
import json
import os
import stat

import pytest

from msprobe.core.errors import ParseError, PathError
from msprobe.core.paths import (atomic_write_json, check_dump_path, check_path, ensure_dir, load_json, make_dir,
                                safe_name)


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


# -- dump_path checked before training, folders 0750 all the way down --------------------------------


def _unwritable_parent(tmp_path):
    """A folder in which nothing can be created: /sys refuses even root, others get a 0500 folder."""
    if os.geteuid() == 0:
        return "/sys"
    folder = tmp_path / "read_only"
    folder.mkdir(mode=0o500)
    return str(folder)


@pytest.mark.parametrize("name, message", [
    ("a" * 300, "too long"), ("dump;touch x", "special characters"), ("dump$(id)", "special characters"),
    ("dump\nx", "special characters"), ("dump path", "special characters"), ("dump`id`", "special characters"),
])
def test_dump_path_names_that_1_2_1_refuses(tmp_path, name, message):
    with pytest.raises(PathError, match=message) as info:
        check_dump_path(str(tmp_path / name))
    assert "\n" not in str(info.value)


def test_dump_path_file_symlink_and_unwritable_places(tmp_path):
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(PathError, match="not a folder"):
        check_dump_path(str(tmp_path / "a_file"))
    with pytest.raises(PathError, match="is a file"):
        check_dump_path(str(tmp_path / "a_file" / "dump"))
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(PathError, match="symbolic link"):
        check_dump_path(str(tmp_path / "link"))
    with pytest.raises(PathError, match="not writable"):
        check_dump_path(os.path.join(_unwritable_parent(tmp_path), "dump"))
    good = tmp_path / "new" / "dump"
    assert check_dump_path(str(good)) == str(good) and not good.exists()  # checked, not created
    assert sorted(os.listdir(tmp_path)) == ["a_file", "link", "real"]  # the writability probe left nothing


def test_relative_dump_path_is_checked_as_an_absolute_path(tmp_path, monkeypatch):
    odd = tmp_path / "abc++"
    odd.mkdir()
    monkeypatch.chdir(odd)
    with pytest.raises(PathError, match="special characters"):
        check_dump_path("./dump")


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o000])
def test_every_created_folder_is_0750_whatever_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        leaf = make_dir(str(tmp_path / "a" / "b" / "c"))
        ensure_dir(str(tmp_path / "x" / "step0" / "rank0"))
        atomic_write_json(str(tmp_path / "y" / "z" / "dump.json"), {})
    finally:
        os.umask(old)
    made = ["a", "a/b", "a/b/c", "x", "x/step0", "x/step0/rank0", "y", "y/z"]
    assert {p: stat.S_IMODE(os.stat(tmp_path / p).st_mode) for p in made} == {p: 0o750 for p in made}
    assert stat.S_IMODE(os.stat(tmp_path / "y" / "z" / "dump.json").st_mode) == 0o640
    assert leaf == str(tmp_path / "a" / "b" / "c")


def test_existing_folders_keep_their_mode(tmp_path):
    tmp_path.joinpath("mine").mkdir(mode=0o700)
    ensure_dir(str(tmp_path / "mine" / "new"))
    assert stat.S_IMODE(os.stat(tmp_path / "mine").st_mode) == 0o700


@pytest.mark.parametrize("content, message", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"Max": ' + "9" * 5000 + "}", "cannot be read"),
    (b"\x80\x81\xfe binary", "not UTF-8"),
    ('{"a": 1', "not valid JSON"),
])
def test_broken_json_files_are_one_parse_error_line(tmp_path, content, message):
    path = tmp_path / "dump.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ParseError, match=message) as info:
        load_json(str(path))
    assert "\n" not in str(info.value)


def test_yaml_is_loaded_safely_and_errors_are_one_line(tmp_path):
    from msprobe.core.paths import load_yaml

    crafted = tmp_path / "list.yaml"
    marker = tmp_path / "PWNED"
    crafted.write_text(f'!!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(ParseError) as info:
        load_yaml(str(crafted))
    assert not marker.exists() and "\n" not in str(info.value)
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 50_000 + "]" * 50_000)
    with pytest.raises(ParseError, match="nested too deeply|not valid YAML"):
        load_yaml(str(deep))
