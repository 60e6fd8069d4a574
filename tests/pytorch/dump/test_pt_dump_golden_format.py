"""Our dumps of the reference samples' model have the reference's layout, names, keys and types."""
import json
import os

import pytest
import torch

from msprobe.pytorch import seed_all
from msprobe.pytorch import PrecisionDebugger
from pt_dump_helpers import REFERENCE_SAMPLES, SampleNet, load_rank, tensor_descriptors, write_config

# entries the reference makes only because of how it hooks (its module backward hooks call
# view_as; its patched torch.ones_like sees autograd's own call inside loss.backward())
REFERENCE_ARTIFACTS = ("Tensor.view_as.", "Torch.ones_like.")
TENSOR_KEYS = ["type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "requires_grad"]


def _sample(name):
    rank_dir = os.path.join(REFERENCE_SAMPLES, name, "step0", "rank")
    return tuple(json.load(open(os.path.join(rank_dir, f))) for f in ("dump.json", "stack.json", "construct.json"))


def _our_dump(tmp_path, task, level, summary_mode="statistics"):
    """The training loop of samples/how_these_were_made_train.py, under our debugger."""
    seed_all(1234, rm_dropout=False)
    model = SampleNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    config = write_config(tmp_path, task, level, {"summary_mode": summary_mode})
    debugger = PrecisionDebugger(config_path=config, model=model)
    for _ in range(2):
        debugger.start()
        x = torch.randn(8, 16)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        debugger.stop()
        debugger.step()
    debugger.close()
    root = tmp_path / "dump"
    return root, load_rank(root)


def _names(data):
    return [n for n in data if not n.startswith(REFERENCE_ARTIFACTS)]


@pytest.mark.parametrize("sample,task,level,summary", [
    ("pytorch_statistics_mix", "statistics", "mix", "statistics"),
    ("pytorch_md5_L1", "statistics", "L1", "md5"),
    ("pytorch_tensor_mix_run_a", "tensor", "mix", "statistics"),
])
def test_same_entries_keys_and_types_as_reference(tmp_path, sample, task, level, summary):
    ref_dump, ref_stack, ref_construct = _sample(sample)
    root, (dump, stack, construct) = _our_dump(tmp_path, task, level, summary)
    assert list(dump) == list(ref_dump)
    assert {k: dump[k] for k in ("task", "level", "framework")} == {k: ref_dump[k] for k in ("task", "level", "framework")}
    assert (dump["dump_data_dir"] is None) == (ref_dump["dump_data_dir"] is None)
    assert sorted(_names(dump["data"])) == sorted(_names(ref_dump["data"]))
    for name in _names(ref_dump["data"]):
        ours, ref = dump["data"][name], ref_dump["data"][name]
        assert list(ours) == list(ref), name
        for desc in tensor_descriptors(ours):
            extra = ["md5"] if summary == "md5" else (["data_name"] if task == "tensor" else [])
            assert list(desc) == TENSOR_KEYS + extra, name
            assert all(isinstance(desc[k], float) for k in ("Max", "Min", "Mean", "Norm"))
            if summary == "md5":
                assert len(desc["md5"]) == 8 and int(desc["md5"], 16) >= 0
    assert sorted(_names(stack)) == sorted(_names(ref_stack))
    assert all(isinstance(lines, list) and lines and all(l.startswith("File ") for l in lines) for lines in stack.values())
    if level == "L1":
        assert construct == {} == ref_construct
    else:
        for name, parent in construct.items():
            if name in ref_construct and not name.endswith(".backward") and ".backward." not in name:
                assert parent == ref_construct[name], name


def test_forward_statistics_equal_reference_values(tmp_path):
    """Same seed, same model: forward statistics match the reference sample to float32 precision."""
    ref_dump, _, _ = _sample("pytorch_statistics_mix")
    _, (dump, _, _) = _our_dump(tmp_path, "statistics", "mix")
    for name in ("Functional.linear.0.forward", "Functional.gelu.0.forward", "Module.l1.Linear.forward.0",
                 "Functional.layer_norm.0.forward", "Tensor.mean.0.forward"):
        ours, ref = tensor_descriptors(dump["data"][name]), tensor_descriptors(ref_dump["data"][name])
        assert len(ours) == len(ref)
        for a, b in zip(ours, ref):
            assert a["shape"] == b["shape"] and a["dtype"] == b["dtype"] and a["requires_grad"] == b["requires_grad"]
            for key in ("Max", "Min", "Mean", "Norm"):
                assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-6), (name, key)
    assert dump["data"]["Functional.gelu.0.forward"]["input_kwargs"] == {"approximate": {"type": "str", "value": "none"}}
    assert dump["data"]["Functional.layer_norm.0.forward"]["input_args"][1] == [{"type": "int", "value": 32}]


def test_tensor_files_match_data_names_and_statistics(tmp_path):
    root, (dump, _, _) = _our_dump(tmp_path, "tensor", "mix")
    tensor_dir = root / "step0" / "rank" / "dump_tensor_data"
    assert dump["dump_data_dir"] == str(tensor_dir)
    descriptors = tensor_descriptors(dump["data"])
    assert {d["data_name"] for d in descriptors} == set(os.listdir(tensor_dir))
    reference_files = set(os.listdir(os.path.join(REFERENCE_SAMPLES, "pytorch_tensor_mix_run_a", "step0", "rank",
                                                   "dump_tensor_data")))
    ours = set(os.listdir(tensor_dir))
    def per_entry(files):  # torch 2.13 passes layer_norm's weight/bias as kwargs: compare counts
        counts = {}
        for f in files:
            if ".forward" in f and not f.startswith(REFERENCE_ARTIFACTS):
                entry = f.split(".input")[0].split(".output")[0].split(".parameters")[0]
                counts[entry] = counts.get(entry, 0) + 1
        return counts
    assert per_entry(ours) == per_entry(reference_files)
    for desc in descriptors:
        saved = torch.load(tensor_dir / desc["data_name"])
        assert list(saved.shape) == desc["shape"] and str(saved.dtype) == desc["dtype"]
        assert saved.float().max().item() == pytest.approx(desc["Max"], rel=1e-6, abs=1e-7)
        assert saved.float().norm().item() == pytest.approx(desc["Norm"], rel=1e-5, abs=1e-6)


def test_bf16_statistics_are_computed_in_float32(tmp_path):
    seed_all(1234, rm_dropout=False)
    model = SampleNet().to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
    debugger.start()
    x = torch.randn(8, 16).to(torch.bfloat16)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    debugger.stop()
    debugger.close()
    dump, _, _ = load_rank(tmp_path / "dump")
    desc = dump["data"]["Functional.linear.0.forward"]["input_args"][0]
    assert desc["dtype"] == "torch.bfloat16"
    expected = x.float()
    assert desc["Mean"] == pytest.approx(expected.mean().item(), rel=1e-6)
    assert desc["Norm"] == pytest.approx(expected.norm().item(), rel=1e-6)
    assert desc["Max"] == expected.max().item()
