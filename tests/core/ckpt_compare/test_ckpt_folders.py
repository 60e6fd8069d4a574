"""ckpt_compare on checkpoints as users have them: `save_pretrained` folders of one weight file (no index), peft
adapter folders, a folder holding both safetensors and a torch.save file; ranking that sees a scaled weight."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import save_file

from msprobe.cli import main


def _llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    return transformers.LlamaForCausalLM(config)


def _compare(tmp_path, first, second, out_name="out"):
    out = tmp_path / out_name
    assert main(["-f", "pytorch", "ckpt_compare", "--ckpt1", str(first), "--ckpt2", str(second), "-o", str(out)]) == 0
    [json_name] = [name for name in os.listdir(out) if name.endswith(".json")]
    with open(out / json_name) as handle:
        return json.load(handle)


def _bin_folder(folder, state):
    """What save_pretrained(safe_serialization=False) wrote before transformers 5 (5 writes safetensors always)."""
    os.makedirs(folder, exist_ok=True)
    torch.save(state, os.path.join(folder, "pytorch_model.bin"))


def test_save_pretrained_folders_of_one_file_compare_and_safetensors_wins_over_bin(tmp_path, capsys):
    model = _llama()
    state = model.state_dict()
    model.save_pretrained(tmp_path / "st")
    assert sorted(n for n in os.listdir(tmp_path / "st") if not n.endswith(".json")) == ["model.safetensors"]
    _bin_folder(tmp_path / "bin", state)
    report = _compare(tmp_path, tmp_path / "st", tmp_path / "bin")  # refused before: "without an index file"
    assert report["summary"]["counts"] == {"equal": len(state)}
    assert report["summary"]["ckpt1_read"] == str(tmp_path / "st" / "model.safetensors")
    assert report["summary"]["ckpt2_read"] == str(tmp_path / "bin" / "pytorch_model.bin")
    # a folder with both: the safetensors file is read (the .bin here holds other values) and the log says so
    model.save_pretrained(tmp_path / "both")
    _bin_folder(tmp_path / "both", {k: v * 2 for k, v in state.items()})
    capsys.readouterr()
    report = _compare(tmp_path, tmp_path / "both", tmp_path / "st", out_name="out2")
    assert report["summary"]["counts"] == {"equal": len(state)}
    assert "holds model.safetensors and pytorch_model.bin: comparing model.safetensors" in capsys.readouterr().out


def _adapter(folder, model, alpha, scale_key=None, as_bin=False):
    """An adapter folder laid out the way peft writes it (adapter_config.json + adapter_model.safetensors, or
    adapter_model.bin): LoRA A/B for q_proj and v_proj of every layer, keys prefixed base_model.model."""
    generator = torch.Generator().manual_seed(5)
    tensors = {}
    for name, module in model.named_modules():
        if name.endswith(("q_proj", "v_proj")):
            prefix = f"base_model.model.{name}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(4, module.in_features, generator=generator) * 0.1
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(module.out_features, 4, generator=generator) * 0.01
    if scale_key:
        tensors[scale_key] = tensors[scale_key] * 1.5
    os.makedirs(folder)
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 4, "lora_alpha": alpha, "lora_dropout": 0.0,
              "target_modules": ["q_proj", "v_proj"], "base_model_name_or_path": "tiny-llama", "bias": "none"}
    with open(os.path.join(folder, "adapter_config.json"), "w") as handle:
        json.dump(config, handle)
    if as_bin:
        torch.save(tensors, os.path.join(folder, "adapter_model.bin"))
    else:
        save_file(tensors, os.path.join(folder, "adapter_model.safetensors"))
    return tensors


def test_two_adapter_folders_compare_with_their_config_differences(tmp_path, capsys):
    model = _llama()
    scaled = "base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"
    first = _adapter(tmp_path / "a", model, alpha=8)
    _adapter(tmp_path / "b", model, alpha=16, scale_key=scaled)
    _adapter(tmp_path / "a_bin", model, alpha=8, as_bin=True)
    capsys.readouterr()
    report = _compare(tmp_path, tmp_path / "a", tmp_path / "b")
    assert report["summary"]["counts"] == {"differs": 1, "equal": len(first) - 1}
    top = report["parameters"][0]
    assert top["key1"] == scaled and top["rel_l2_diff"] == pytest.approx(0.5 / 1.5, rel=1e-6)
    assert top["norm_ratio"] == pytest.approx(1.5, rel=1e-6)
    assert report["summary"]["adapter_config_differs"] == {"lora_alpha": [8, 16]}
    assert "adapter_config.json differs: lora_alpha 8 -> 16" in capsys.readouterr().out
    report = _compare(tmp_path, tmp_path / "a", tmp_path / "a_bin", out_name="out2")
    assert report["summary"]["counts"] == {"equal": len(first)} and report["summary"]["adapter_config_differs"] == {}


def test_a_folder_with_several_weight_files_and_no_index_is_one_error_line(tmp_path):
    os.makedirs(tmp_path / "many")
    for name in ("part_a.safetensors", "part_b.safetensors"):
        save_file({"w": torch.zeros(2)}, str(tmp_path / "many" / name))
    torch.save({"w": torch.zeros(2)}, tmp_path / "ok.pt")
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "ckpt_compare", "--ckpt1",
                           str(tmp_path / "many"), "--ckpt2", str(tmp_path / "ok.pt"), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "part_a.safetensors, part_b.safetensors" in lines[0], lines


def test_a_weight_scaled_by_one_and_a_half_ranks_first_after_a_training_step(tmp_path):
    model = _llama()
    torch.save(model.state_dict(), tmp_path / "a.pt")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 64, (4, 16), generator=torch.Generator().manual_seed(2))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    scaled = "model.layers.1.input_layernorm.weight"
    with torch.no_grad():
        model.get_parameter(scaled).mul_(1.5)
    torch.save(model.state_dict(), tmp_path / "b.pt")
    before = torch.load(tmp_path / "a.pt")
    after = model.state_dict()
    report = _compare(tmp_path, tmp_path / "a.pt", tmp_path / "b.pt")
    rows = report["parameters"]
    assert all(row["status"] == "differs" for row in rows) and len(rows) == len(before)
    assert rows[0]["key1"] == scaled
    # by cosine alone it would not be first: the scale leaves its direction almost untouched
    assert min(rows, key=lambda row: row["cosine"])["key1"] != scaled and rows[0]["cosine"] > 0.99999
    for row in rows:
        a, b = before[row["key1"]].double().numpy().ravel(), after[row["key1"]].double().numpy().ravel()
        largest = max(np.linalg.norm(a), np.linalg.norm(b))
        assert row["rel_l2_diff"] == pytest.approx(np.linalg.norm(a - b) / largest, rel=1e-9)
        assert row["norm_ratio"] == pytest.approx(np.linalg.norm(b) / np.linalg.norm(a), rel=1e-9)
    assert [row["rel_l2_diff"] for row in rows] == sorted((row["rel_l2_diff"] for row in rows), reverse=True)
