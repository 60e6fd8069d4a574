"""Every reader of user files in config / paths / run_ut / op_generate / api_precision_compare: a crafted
file that would create a file if its content were executed is refused (or read as plain data), and the
user gets one line, never a traceback."""
import json
import os
import pickle

import pytest

from msprobe.cli import main
from msprobe.core.errors import MsprobeError, ParseError


class _Payload:
    """Unpickling this runs `touch <marker>`."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _pickle_file(path, marker):
    path.write_bytes(pickle.dumps(_Payload(marker)))
    return str(path)


def _cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr().out
    errors = [line for line in out.splitlines() if line.startswith("[ERROR]")]
    assert code == 1 and len(errors) == 1 and "Traceback" not in out and "unexpected" not in errors[0], out
    return errors[0]


def test_pickle_as_config_json_runs_nothing(tmp_path):
    from msprobe.core.config import load_config

    marker = tmp_path / "PWNED"
    with pytest.raises(ParseError):
        load_config(_pickle_file(tmp_path / "config.json", marker))
    assert not marker.exists()


def test_python_tags_in_yaml_run_nothing(tmp_path):
    from msprobe.core.paths import load_yaml

    marker = tmp_path / "PWNED"
    path = tmp_path / "mapping.yaml"
    path.write_text(f"a: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ParseError):
        load_yaml(str(path))
    assert not marker.exists()


def test_pickle_as_op_generate_config_and_extract_file_runs_nothing(tmp_path, capsys):
    marker = tmp_path / "PWNED"
    _cli(capsys, "-f", "pytorch", "op_generate", "-i", _pickle_file(tmp_path / "config_op.json", marker),
         "-o", str(tmp_path / "out"))
    config = tmp_path / "config2.json"
    config.write_text(json.dumps({"extract_api_path": _pickle_file(tmp_path / "extract.json", marker)}))
    _cli(capsys, "-f", "pytorch", "op_generate", "-i", str(config), "-o", str(tmp_path / "out"))
    assert not marker.exists()


def test_pickle_and_binary_as_api_precision_compare_csvs(tmp_path, capsys):
    marker = tmp_path / "PWNED"
    crafted = _pickle_file(tmp_path / "npu.csv", marker)
    line = _cli(capsys, "-f", "pytorch", "api_precision_compare", "-npu", crafted, "-gpu", crafted,
                "-o", str(tmp_path / "out"))
    assert "npu.csv" in line and not marker.exists()
    binary = tmp_path / "bin.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    _cli(capsys, "-f", "pytorch", "api_precision_compare", "-npu", str(binary), "-gpu", str(binary))


def test_resume_csv_cut_mid_character_or_crafted(tmp_path):
    from msprobe.core.run_ut.report import PYTORCH_LAYOUT, ResultWriter

    writer = ResultWriter(str(tmp_path), PYTORCH_LAYOUT)
    writer.write({"api": "Functional.gelu.0", "forward": "pass", "message": "ü", "details": [
        {"name": "Functional.gelu.0.forward.output.0", "status": "pass", "message": "ü"}]})
    writer.write({"api": "Functional.relu.0", "forward": "pass", "message": "", "details": [
        {"name": "Functional.relu.0.forward.output.0", "status": "pass", "message": "über"}]})
    writer.close()
    # a kill in the middle of the last line, inside the two bytes of 'ü'
    for path in (writer.result_path, writer.details_path):
        data = open(path, "rb").read()
        cut = data.rindex("ü".encode()) + 1 if "details" in path else len(data) - 2
        with open(path, "wb") as handle:
            handle.write(data[:cut])
    resumed = ResultWriter(None, PYTORCH_LAYOUT, resume_csv=writer.result_path)
    assert resumed.done == {"Functional.gelu.0"}
    resumed.close()
    with open(resumed.details_path, encoding="utf-8") as handle:
        assert [line.split(",")[0] for line in handle.read().splitlines()[1:]] == ["Functional.gelu.0.forward.output.0"]
    marker = tmp_path / "PWNED"
    crafted = tmp_path / "accuracy_checking_result_1.csv"
    _pickle_file(crafted, marker)
    (tmp_path / "accuracy_checking_details_1.csv").write_bytes(crafted.read_bytes())
    with pytest.raises(MsprobeError) as info:
        ResultWriter(None, PYTORCH_LAYOUT, resume_csv=str(crafted))
    assert "\n" not in str(info.value) and not marker.exists()


def test_crafted_tensor_file_in_a_real_data_dump_runs_nothing(tmp_path):
    import torch

    from msprobe.core.errors import UnsupportedError
    from msprobe.pytorch.api_accuracy_checker.arguments import build_call_args

    marker = tmp_path / "PWNED"
    torch.save({"x": _Payload(marker)}, tmp_path / "Functional.relu.0.forward.input.0.pt")
    record = {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2],
                              "data_name": "Functional.relu.0.forward.input.0.pt"}]}
    with pytest.raises(UnsupportedError, match="cannot be read safely"):
        build_call_args(record, "Functional.relu.0", str(tmp_path), "cpu", with_grad=False)
    assert not marker.exists()
    outside = tmp_path.parent / f"{tmp_path.name}_outside.pt"
    torch.save(torch.ones(2), outside)
    record["input_args"][0]["data_name"] = f"../{outside.name}"
    with pytest.raises(UnsupportedError, match="not a file name"):
        build_call_args(record, "Functional.relu.0", str(tmp_path), "cpu", with_grad=False)


def test_absurd_shapes_in_statistics_dumps_allocate_nothing():
    import numpy as np

    from msprobe.core.errors import UnsupportedError
    from msprobe.core.run_ut.random_data import random_values

    rng = np.random.default_rng(0)
    for shape in ([10 ** 12], [-1, 3], ["2"], [2 ** 70, 2 ** 70], "abc"):
        with pytest.raises(UnsupportedError):
            random_values({"shape": shape, "dtype": "torch.float32"}, rng)
    ints = random_values({"shape": [4], "dtype": "torch.int64", "Max": 1e300, "Min": -1e300}, rng)
    assert ints.dtype == np.int64 and ints.shape == (4,)
