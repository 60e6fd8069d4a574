"""examples/train_mlp.py (used by the README demo) dumps fp32 and bf16 runs that line up name by name."""
import importlib.util
import os

from pt_dump_helpers import load_rank

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "train_mlp.py")


def _example():
    spec = importlib.util.spec_from_file_location("msprobe_example_train_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fp32_and_bf16_runs_have_the_same_entries(tmp_path):
    example = _example()
    example.main(["--dump-path", str(tmp_path / "fp32"), "--steps", "1", "--task", "tensor"])
    example.main(["--dump-path", str(tmp_path / "bf16"), "--steps", "1", "--task", "tensor", "--dtype", "bf16"])
    fp32, _, _ = load_rank(tmp_path / "fp32")
    bf16, _, _ = load_rank(tmp_path / "bf16")
    assert list(fp32["data"]) == list(bf16["data"])
    first = "Functional.linear.0.forward"
    assert fp32["data"][first]["output"][0]["dtype"] == "torch.float32"
    assert bf16["data"][first]["output"][0]["dtype"] == "torch.bfloat16"
    assert fp32["data"][first]["input_args"][0]["Max"] != bf16["data"][first]["output"][0]["Max"]
    assert (tmp_path / "bf16" / "step0" / "rank" / "dump_tensor_data" / f"{first}.output.0.pt").exists()
