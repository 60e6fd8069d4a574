"""code_mapping on hostile inputs: time linear in line and scope length, and one [ERROR] line for a binary or
oversized statistic.csv / mapping.csv instead of a traceback."""
import csv
import os
import time

import pytest

from msprobe.cli import main
from msprobe.mindspore.code_mapping.ir_parser import parse_ir

LONG_SCOPE = "Default/" + "/".join(f"block{i}-Cell" for i in range(1700)) + "/Add-op3"  # ~20,000 characters
HOSTILE_ATTRS = " cnode_primal_attrs: {" * 8000  # ~168 KB of unclosed attribute blocks on one node line


def _write_ir(path):
    lines = [
        "subgraph @1_construct(%para1_x) {",
        '  %0(CNode_1) = MatMul(%para1_x, %para2_w) cnode_primal_attrs: {unique_id: "5"}' + HOSTILE_ATTRS,
        "      : (<Tensor[Float32], (2, 2)>) -> (<Tensor[Float32], (2, 2)>)",
        "      # Fullname with scope: (Default/fc-Dense/MatMul-op0)",
        "      # In file /src/model.py:10, 8~20/        out = self.matmul(x)/",
        '  %1(CNode_2) = Add(%0, %para3_b) cnode_primal_attrs: {unique_id: "6"}',
        f"      # Fullname with scope: ({LONG_SCOPE})",
        "      # In file /src/model.py:11, 8~20/        out = out + self.bias/" + " " * 20000,
        "}",
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _write_statistic(folder, op_names):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "statistic.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Op Type", "Op Name", "Max Value"])
        writer.writerows([["Add", name, "1.0"] for name in op_names])
    return folder


def test_long_ir_lines_and_long_scopes_map_in_linear_time(tmp_path):
    # before: the attribute pattern backtracked over the 168 KB line (minutes) and every end position of a
    # 20,000-character kernel name walked back through the key trie (113 s); now both are one pass
    ir_file = _write_ir(tmp_path / "graph.ir")
    long_key = LONG_SCOPE.replace("/", "_")
    dump = _write_statistic(tmp_path / "dump", ["Default_fc-Dense_MatMul-op0", "Fused_" + long_key + "_x",
                                                long_key + "1"])
    started = time.perf_counter()
    nodes = parse_ir(ir_file)
    assert main(["-f", "mindspore", "code_mapping", "--ir", ir_file, "--dump_data", str(dump)]) == 0
    elapsed = time.perf_counter() - started
    assert elapsed < 20, elapsed  # linear work is well under a second here; the quadratic one took minutes
    assert nodes["Default_fc-Dense_MatMul-op0"].unique_id == "5"
    assert nodes[long_key].code == ["In file /src/model.py:11, 8~20/        out = out + self.bias"]
    (mapped,) = [name for name in os.listdir(dump) if name.startswith("statistic_code_mapping_")]
    with open(dump / mapped, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows[0]["Scope Name"] == "Default/fc-Dense/MatMul-op0"
    assert rows[1]["Scope Name"] == LONG_SCOPE and "model.py:11" in rows[1]["Code Stack"]
    assert rows[2]["Scope Name"] == ""  # 'Add-op31' is not 'Add-op3'


def _one_error_line(capsys, code):
    out = capsys.readouterr().out
    errors = [line for line in out.splitlines() if line.startswith("[ERROR]")]
    assert code == 1 and len(errors) == 1 and "Traceback" not in out, out[-2000:]
    return errors[0]


@pytest.fixture
def default_csv_field_limit():
    # the limit is process-wide and importing some MindSpore modules raises it: pin the csv module's default
    previous = csv.field_size_limit(131072)
    yield
    csv.field_size_limit(previous)


def test_binary_and_huge_field_csvs_are_one_error_line(tmp_path, capsys, default_csv_field_limit):
    ir_file = _write_ir(tmp_path / "graph.ir")
    binary = tmp_path / "binary"
    binary.mkdir()
    (binary / "statistic.csv").write_bytes(b"Op Name\n\xff\xfe\x00\x81 binary\n")
    line = _one_error_line(capsys, main(["-f", "mindspore", "code_mapping", "--ir", ir_file,
                                         "--dump_data", str(binary)]))
    assert "statistic.csv" in line and "UTF-8" in line
    huge = tmp_path / "huge"
    huge.mkdir()
    (huge / "statistic.csv").write_text("Op Type,Op Name\nAdd,\"" + "x" * 200000 + "\"\n")
    line = _one_error_line(capsys, main(["-f", "mindspore", "code_mapping", "--ir", ir_file,
                                         "--dump_data", str(huge)]))
    assert "statistic.csv" in line and "field larger than field limit" in line
    renamed = tmp_path / "renamed"
    renamed.mkdir()
    (renamed / "12345.npy").write_bytes(b"\x93NUMPY")
    (renamed / "mapping.csv").write_bytes(b"\x00\xff\xfe binary")
    line = _one_error_line(capsys, main(["-f", "mindspore", "code_mapping", "--ir", ir_file,
                                         "--dump_data", str(renamed)]))
    assert "mapping.csv" in line
