"""Every level (L0, L1, mix, L2) and task (statistics, md5, tensor, overflow_check) on real models."""
import zlib

import pytest
import torch

from msprobe.pytorch import PrecisionDebugger
from pt_dump_helpers import MLP, ConvNet, TinyTransformer, load_rank, run_dump, tensor_descriptors, write_config


def test_L0_conv_net_records_modules_only_with_parameters(tmp_path):
    torch.manual_seed(0)
    dump, stack, construct = load_rank(run_dump(tmp_path, ConvNet(), level="L0"))
    names = set(dump["data"])
    assert {"Module.conv.Conv2d.forward.0", "Module.conv.Conv2d.backward.0", "Module.conv.Conv2d.parameters_grad",
            "Module.bn.BatchNorm2d.forward.0", "Module.relu.ReLU.forward.0", "Module.fc.Linear.backward.0"} <= names
    assert all(name.startswith("Module.") for name in names)
    conv = dump["data"]["Module.conv.Conv2d.forward.0"]
    assert conv["parameters"]["weight"]["shape"] == [4, 1, 3, 3]
    assert dump["data"]["Module.conv.Conv2d.backward.0"]["input"][0]["shape"] == [2, 4, 8, 8]
    assert set(stack) == {n for n in names if ".forward." in n}
    assert construct["Module.conv.Conv2d.forward.0"] is None


def test_L1_transformer_records_attention_and_embedding(tmp_path):
    torch.manual_seed(0)
    dump, _, construct = load_rank(run_dump(tmp_path, TinyTransformer(), level="L1"))
    names = set(dump["data"])
    assert {"Functional.embedding.0.forward", "Functional.multi_head_attention_forward.0.forward",
            "Functional.multi_head_attention_forward.0.backward", "Functional.gelu.0.backward",
            "Functional.embedding.0.backward"} <= names
    assert construct == {}
    mha = dump["data"]["Functional.multi_head_attention_forward.0.forward"]
    assert mha["input_kwargs"]["need_weights"] == {"type": "bool", "value": False}
    emb_bwd = dump["data"]["Functional.embedding.0.backward"]["output"]
    assert emb_bwd[0] is None and emb_bwd[1]["shape"] == [20, 16]  # no grad for indices


def test_mix_links_apis_to_their_modules(tmp_path):
    torch.manual_seed(0)
    dump, _, construct = load_rank(run_dump(tmp_path, TinyTransformer(), level="mix"))
    assert construct["Functional.linear.0.forward"] == "Module.mlp.0.Linear.forward.0"
    assert construct["Module.mlp.0.Linear.forward.0"] == "Module.mlp.Sequential.forward.0"
    assert construct["Functional.linear.0.backward"] == "Module.mlp.0.Linear.backward.0"
    assert construct["Tensor.add_.0.forward"] == "optimizer"


def test_L2_records_aten_ops(tmp_path):
    torch.manual_seed(0)
    dump, _, _ = load_rank(run_dump(tmp_path, MLP(), level="L2"))
    names = list(dump["data"])
    assert "Aten.addmm.0.forward" in names and "Aten.relu.0.forward" in names
    assert all(name.startswith("Aten.") and name.endswith(".forward") for name in names)
    assert any(name.startswith("Aten.threshold_backward.") for name in names)  # backward ops are ATen ops too


def test_md5_is_crc32_of_raw_bytes(tmp_path):
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1", {"summary_mode": "md5"}))
    x = torch.randn(3, 4)
    debugger.start()
    torch.relu(x)
    debugger.stop()
    debugger.close()
    dump, _, _ = load_rank(tmp_path / "dump")
    desc = dump["data"]["Torch.relu.0.forward"]["input_args"][0]
    assert desc["md5"] == f"{zlib.crc32(x.numpy().tobytes()):08x}"


def test_tensor_task_writes_pt_files_for_every_descriptor(tmp_path):
    torch.manual_seed(0)
    root = run_dump(tmp_path, MLP(), task="tensor", level="mix")
    dump, _, _ = load_rank(root)
    files = root / "step0" / "rank" / "dump_tensor_data"
    for desc in tensor_descriptors(dump["data"]):
        assert torch.load(files / desc["data_name"]).shape == torch.Size(desc["shape"])
    assert (files / "Module.fc1.Linear.forward.0.parameters.weight.pt").exists()
    assert (files / "Module.fc1.Linear.parameters_grad.weight.pt").exists()


@pytest.mark.parametrize("overflow_nums,expected", [(1, 1), (2, 2), (-1, 3)])
def test_overflow_check_dumps_only_overflowing_calls(tmp_path, overflow_nums, expected):
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "overflow_check", "L1",
                                                          {"overflow_nums": overflow_nums}))
    debugger.start()
    x = torch.tensor([1.0, 2.0, 3e38])
    y = x * 10          # overflows to inf
    y = y + 1           # inf stays
    torch.relu(x)       # fine
    torch.log(-x)       # nan
    debugger.stop()
    debugger.close()
    dump, _, _ = load_rank(tmp_path / "dump")
    names = list(dump["data"])
    assert len(names) == expected
    assert names[0] == "Tensor.__mul__.0.forward"
    assert all("relu" not in n for n in names)
    files = list((tmp_path / "dump" / "step0" / "rank" / "dump_tensor_data").iterdir())
    assert {f.name.split(".forward")[0] for f in files} == {n.split(".forward")[0] for n in names}


def test_tensor_task_writes_a_gradient_seen_by_two_hooks_once(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    root = run_dump(tmp_path, model, task="tensor", level="L1")
    files = root / "step0" / "rank" / "dump_tensor_data"
    # the gradient w.r.t. gelu's output is the gradient w.r.t. the second linear's input; the two hooks
    # get it in two short-lived tensor objects
    first = files / "Functional.gelu.0.backward.input.0.pt"
    second = files / "Functional.linear.1.backward.output.0.pt"
    assert torch.equal(torch.load(first), torch.load(second))
    assert first.stat().st_ino == second.stat().st_ino


def test_tensor_task_links_files_only_for_identical_bits(tmp_path):
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "tensor", "L1"))
    base = torch.randn(4)
    debugger.start()
    torch.relu(base.view(4))
    torch.relu(base.view(4))    # a new view object of the same memory: one file for both
    base.numpy()[:] = 7.0       # written behind the version counter
    torch.relu(base.view(4))    # same memory, layout and version, other bits: a file of its own
    debugger.stop()
    debugger.close()
    files = tmp_path / "dump" / "step0" / "rank" / "dump_tensor_data"
    first, second, third = (files / f"Torch.relu.{i}.forward.input.0.pt" for i in range(3))
    assert first.stat().st_ino == second.stat().st_ino != third.stat().st_ino
    assert torch.equal(torch.load(third), torch.full((4,), 7.0))
