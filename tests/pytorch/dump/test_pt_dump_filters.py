"""scope, list, data_mode, step and rank filters."""
import pytest
import torch

from pt_dump_helpers import MLP, TinyTransformer, load_rank, run_dump


def _names(tmp_path, model=None, level="L1", steps=1, step=0, **section):
    torch.manual_seed(0)
    root = run_dump(tmp_path, model or MLP(), level=level, section=section, steps=steps)
    return list(load_rank(root, step=step)[0]["data"])


def test_scope_of_api_names_keeps_the_range(tmp_path):
    names = _names(tmp_path, scope=["Functional.linear.0.forward", "Torch.relu.0.forward"])
    assert [n for n in names if n.endswith(".forward")] == ["Functional.linear.0.forward", "Torch.relu.0.forward"]
    assert set(names) == {"Functional.linear.0.forward", "Torch.relu.0.forward",
                          "Functional.linear.0.backward", "Torch.relu.0.backward"}


def test_scope_of_module_names_includes_the_module_body(tmp_path):
    names = _names(tmp_path, model=TinyTransformer(), level="mix",
                   scope=["Module.ln.LayerNorm.forward.0", "Module.attn.MultiheadAttention.forward.0"])
    forward = [n for n in names if ".forward" in n]
    assert forward[0] in ("Functional.layer_norm.0.forward", "Module.ln.LayerNorm.forward.0")
    assert "Functional.multi_head_attention_forward.0.forward" in forward
    assert "Module.attn.MultiheadAttention.forward.0" in forward
    assert not any("embedding" in n or "gelu" in n or "mlp" in n for n in names)


def test_list_with_full_names_and_substrings(tmp_path):
    assert set(_names(tmp_path, list=["Functional.linear.1.forward", "relu"])) == {
        "Functional.linear.1.forward", "Functional.linear.1.backward", "Torch.relu.0.forward", "Torch.relu.0.backward"}


def test_list_expands_matching_module_in_mix(tmp_path):
    names = _names(tmp_path, model=TinyTransformer(), level="mix", list=["Module.mlp.Sequential.forward.0"])
    assert "Module.mlp.Sequential.forward.0" in names
    assert {"Functional.linear.0.forward", "Functional.gelu.0.forward", "Module.mlp.1.GELU.forward.0"} <= set(names)
    assert not any(n.startswith(("Functional.embedding", "Module.attn", "Functional.layer_norm")) for n in names)


@pytest.mark.parametrize("data_mode,forward_keys,backward_keys", [
    (["forward"], {"input_args", "input_kwargs", "output"}, None),
    (["backward"], None, {"input", "output"}),
    (["input"], {"input_args", "input_kwargs"}, {"input"}),
    (["forward", "output"], {"output"}, None),
    (["all"], {"input_args", "input_kwargs", "output"}, {"input", "output"}),
])
def test_data_mode(tmp_path, data_mode, forward_keys, backward_keys):
    torch.manual_seed(0)
    dump = load_rank(run_dump(tmp_path, MLP(), section={"data_mode": data_mode}))[0]["data"]
    fwd, bwd = dump.get("Functional.linear.0.forward"), dump.get("Functional.linear.0.backward")
    assert (set(fwd) if fwd else None) == forward_keys
    assert (set(bwd) if bwd else None) == backward_keys
    assert ("Functional.linear.0.forward" in dump) == (forward_keys is not None)  # no empty entries


def test_backward_only_module_dump_has_no_forward_entries(tmp_path):
    torch.manual_seed(0)
    dump = load_rank(run_dump(tmp_path, MLP(), level="L0", section={"data_mode": ["backward"]}))[0]["data"]
    assert not [name for name in dump if ".forward." in name]
    assert "Module.fc1.Linear.backward.0" in dump and "Module.fc1.Linear.parameters_grad" in dump


def test_step_filter(tmp_path):
    torch.manual_seed(0)
    root = run_dump(tmp_path, MLP(), steps=4, step=[1, 3])
    assert sorted(p.name for p in root.iterdir()) == ["step1", "step3"]
    assert "Functional.linear.0.forward" in load_rank(root, step=3)[0]["data"]


def test_rank_filter_in_single_process_means_rank_0(tmp_path):
    torch.manual_seed(0)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert (run_dump(tmp_path / "a", MLP(), rank=[0]) / "step0" / "rank" / "dump.json").exists()
    assert not (run_dump(tmp_path / "b", MLP(), rank=[1])).exists()
