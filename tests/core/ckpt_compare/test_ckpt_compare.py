"""ckpt_compare on real transformers checkpoints: torch.save files, safetensors, sharded folders, renamed keys."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers
from openpyxl import load_workbook

from msprobe.cli import main


def _llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
    return transformers.LlamaForCausalLM(config)


def _compare(tmp_path, first, second, *extra, out_name="out"):
    out = tmp_path / out_name
    code = main(["-f", "pytorch", "ckpt_compare", "--ckpt1", str(first), "--ckpt2", str(second), "-o", str(out),
                 *extra])
    assert code == 0
    [json_name] = [name for name in os.listdir(out) if name.endswith(".json")]
    with open(out / json_name) as handle:
        report = json.load(handle)
    return report, out / json_name.replace(".json", ".xlsx")


def _expected(a, b):
    a, b = a.double().numpy().ravel(), b.double().numpy().ravel()
    diff = np.abs(a - b)
    scale = np.maximum(np.abs(a), np.abs(b))
    return {"cosine": float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)), "max_abs_diff": float(diff.max()),
            "max_rel_diff": float((diff[scale > 0] / scale[scale > 0]).max()),
            "l2_1": float(np.linalg.norm(a)), "l2_2": float(np.linalg.norm(b))}


def test_scaled_parameter_renamed_and_dropped_keys_are_found_worst_first(tmp_path):
    model = _llama()
    state = model.state_dict()
    torch.save(state, tmp_path / "a.pt")
    changed = {k.replace("model.layers.", "model.blocks."): v.clone() for k, v in state.items()}
    changed["model.blocks.1.post_attention_layernorm.weight"] *= 1.02
    changed["model.blocks.0.mlp.up_proj.weight"][3, 5] += 0.5
    del changed["model.blocks.0.self_attn.q_proj.weight"]
    changed["extra.step"] = torch.tensor(7)
    torch.save({"model": changed}, tmp_path / "b.pt")

    report, xlsx = _compare(tmp_path, tmp_path / "a.pt", tmp_path / "b.pt",
                            "--key-map", r"^model\.layers\.=>model.model.blocks.", "--key-map", r"^lm_head=>model.lm_head",
                            "--key-map", r"^model\.(norm|embed)=>model.model.\1")
    rows = {(row["key1"], row["key2"]): row for row in report["parameters"]}
    up = rows[("model.layers.0.mlp.up_proj.weight", "model.model.blocks.0.mlp.up_proj.weight")]
    norm = rows[("model.layers.1.post_attention_layernorm.weight",
                 "model.model.blocks.1.post_attention_layernorm.weight")]
    for row, key in ((up, "model.layers.0.mlp.up_proj.weight"), (norm, "model.layers.1.post_attention_layernorm.weight")):
        expected = _expected(state[key], changed[key.replace("model.layers.", "model.blocks.")])
        assert row["status"] == "differs"
        for name, value in expected.items():
            assert row[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    assert rows[("model.layers.0.self_attn.q_proj.weight", None)]["status"] == "only in ckpt1"
    assert rows[(None, "model.extra.step")]["status"] == "only in ckpt2"
    statuses = [row["status"] for row in report["parameters"]]
    assert statuses[:2] == ["only in ckpt1", "only in ckpt2"] and statuses[2:4] == ["differs", "differs"]
    assert set(statuses[4:]) == {"equal"} and len(statuses) == len(state) + 1
    # the worse of the two differing pairs (the single large change: lower cosine) comes first
    assert report["parameters"][2]["key1"] == "model.layers.0.mlp.up_proj.weight"
    assert report["summary"]["counts"] == {"only in ckpt1": 1, "only in ckpt2": 1, "differs": 2,
                                           "equal": len(state) - 3}
    sheet = load_workbook(xlsx).active
    assert [cell.value for cell in sheet[1]][:3] == ["Key (ckpt1)", "Key (ckpt2)", "Status"]
    assert sheet.cell(4, 1).value == "model.layers.0.mlp.up_proj.weight"
    assert sheet.cell(4, 1).fill.fgColor.rgb.endswith("FF0000")
    assert oct(os.stat(xlsx).st_mode & 0o777) == "0o640"


def test_sharded_safetensors_and_bin_folders_equal_the_single_file(tmp_path):
    model = _llama()
    model.save_pretrained(tmp_path / "st", max_shard_size="20KB")
    model.save_pretrained(tmp_path / "bin", max_shard_size="20KB", safe_serialization=False)
    assert len([n for n in os.listdir(tmp_path / "st") if n.endswith(".safetensors")]) > 2
    torch.save(model.state_dict(), tmp_path / "whole.pt")
    report, _ = _compare(tmp_path, tmp_path / "st", tmp_path / "whole.pt")
    assert report["summary"]["counts"] == {"equal": len(model.state_dict())}
    report, _ = _compare(tmp_path, tmp_path / "bin", tmp_path / "st", out_name="out2")
    assert report["summary"]["counts"] == {"equal": len(model.state_dict())}


def test_bfloat16_against_float32_reports_dtype_and_rounding(tmp_path):
    model = _llama()
    state = {k: v for k, v in model.state_dict().items() if k.endswith("down_proj.weight")}
    torch.save(state, tmp_path / "fp32.pt")
    torch.save({k: v.bfloat16() for k, v in state.items()}, tmp_path / "bf16.pt")
    from safetensors.torch import save_file

    save_file({k: v.bfloat16().contiguous() for k, v in state.items()}, str(tmp_path / "bf16.safetensors"))
    for second in ("bf16.pt", "bf16.safetensors"):
        report, _ = _compare(tmp_path, tmp_path / "fp32.pt", tmp_path / second, out_name=f"out_{second}")
        for row in report["parameters"]:
            expected = _expected(state[row["key1"]], state[row["key1"]].bfloat16().float())
            assert row["dtype1"] == "float32" and row["dtype2"] == "bfloat16" and row["status"] == "differs"
            assert row["max_rel_diff"] == pytest.approx(expected["max_rel_diff"], rel=1e-12)
            assert 0 < row["max_rel_diff"] <= 2 ** -8


@pytest.mark.parametrize("content, message", [
    (b"\x00" * 4, "not a safetensors file"),
    ((10 ** 12).to_bytes(8, "little") + b"{}", "declared header"),
    (len(b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1600]}}').to_bytes(8, "little")
     + b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1600]}}' + b"\x00" * 16, "outside the file"),
])
def test_crafted_safetensors_give_one_error_line(tmp_path, content, message):
    (tmp_path / "bad.safetensors").write_bytes(content)
    torch.save({"w": torch.zeros(4)}, tmp_path / "ok.pt")
    done = subprocess.run([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "ckpt_compare", "--ckpt1",
                           str(tmp_path / "bad.safetensors"), "--ckpt2", str(tmp_path / "ok.pt"), "-o",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "[ERROR]" in lines[0] and message in lines[0], lines


def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"w": torch.zeros(2), "evil": Evil()}, tmp_path / "evil.pt")
    torch.save({"w": torch.zeros(2)}, tmp_path / "ok.pt")
    code = main(["-f", "pytorch", "ckpt_compare", "--ckpt1", str(tmp_path / "evil.pt"), "--ckpt2",
                 str(tmp_path / "ok.pt"), "-o", str(tmp_path / "out")])
    assert code == 1 and not marker.exists()
