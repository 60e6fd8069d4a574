"""config_check on real PyTorch training setups: packs written by ConfigChecker, compared by the CLI."""
import argparse
import json
import os
import zipfile

import pytest
import torch
import transformers

from msprobe.cli import main
from msprobe.core.config_check import ConfigChecker


def _model(seed):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50, n_positions=16)
    return transformers.GPT2LMHeadModel(config)


def _train(pack, *, seed=0, lr=1e-3, shuffle_seed=0, dropout_seed=0, shell=None, env=None, monkeypatch=None):
    """A real little training run: ConfigChecker packs it; returns nothing, the pack is on disk."""
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    ConfigChecker.apply_patches("pytorch", batches=2)
    try:
        model = _model(seed)
        args = argparse.Namespace(batch_size=4, run_name="x", hf_token="hf_secret_value")
        ConfigChecker(model=model, output_zip_path=str(pack), fmk="pytorch", shell_path=[shell] if shell else [],
                      hyperparameters=args)
        data = torch.utils.data.TensorDataset(torch.arange(64).reshape(16, 4) % 50)
        loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True,
                                             generator=torch.Generator().manual_seed(shuffle_seed))
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        torch.manual_seed(dropout_seed)
        for (batch,) in loader:
            loss = model(batch, labels=batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        ConfigChecker._recorder and ConfigChecker._recorder.on_batches_done and ConfigChecker._recorder.on_batches_done()
    finally:
        ConfigChecker.remove_patches()


def _compare(tmp_path, a, b):
    out = tmp_path / "report"
    assert main(["-f", "pytorch", "config_check", "-c", str(a), str(b), "-o", str(out)]) == 0
    [name] = [n for n in os.listdir(out) if n.endswith(".json")]
    with open(out / name) as handle:
        return json.load(handle)["differences"]


def test_identical_setups_differ_in_nothing_that_matters(tmp_path, monkeypatch):
    _train(tmp_path / "a.zip")
    _train(tmp_path / "b.zip")
    found = _compare(tmp_path, tmp_path / "a.zip", tmp_path / "b.zip")
    assert [d for d in found if d["impact"] != "low"] == []


def test_learning_rate_data_order_seed_and_env_are_named_and_ranked(tmp_path, monkeypatch):
    script = tmp_path / "run.sh"
    script.write_text("export OMP_NUM_THREADS=4\npython train.py --lr 1e-3 --global-batch-size=32 \\\n  --seed 1\n")
    _train(tmp_path / "a.zip", shell=script)
    script.write_text("export OMP_NUM_THREADS=4\npython train.py --lr 2e-3 --global-batch-size=32 \\\n  --seed 1\n")
    _train(tmp_path / "b.zip", shell=script, shuffle_seed=1, dropout_seed=5, env={"NVIDIA_TF32_OVERRIDE": "0",
                                                                                  "MY_HOSTNAME_X": "b"},
           monkeypatch=monkeypatch)
    found = _compare(tmp_path, tmp_path / "a.zip", tmp_path / "b.zip")
    by_item = {(d["check"], d["item"]): d for d in found}
    assert by_item[("hyperparameters", "lr")]["a"] == "1e-3" and by_item[("hyperparameters", "lr")]["b"] == "2e-3"
    assert by_item[("hyperparameters", "lr")]["impact"] == "high"
    assert ("hyperparameters", "global_batch_size") not in by_item
    assert by_item[("dataset", "batch 0")]["impact"] == "high"
    assert by_item[("environment", "NVIDIA_TF32_OVERRIDE")]["impact"] == "high"
    assert by_item[("environment", "MY_HOSTNAME_X")]["impact"] == "low"
    seeds = [d for d in found if d["check"] == "random" and d["item"].startswith("seed call")]
    assert seeds and "torch.manual_seed(5)" in seeds[0]["b"]
    # where the random streams part: the first dropout and the sampler's first randperm, named at the caller
    parted = {d["item"]: d for d in found if d["item"].endswith("generator state before the first call")}
    assert "torch.nn.functional.dropout: generator state before the first call" in parted
    assert "/torch/" not in parted["torch.nn.functional.dropout: generator state before the first call"]["a"]
    # high impact first, low last
    impacts = [d["impact"] for d in found]
    assert impacts == sorted(impacts, key={"high": 0, "medium": 1, "low": 2}.get)
    assert found[-1]["impact"] == "low"


def test_one_changed_initial_weight_is_named(tmp_path):
    ConfigChecker(model=_model(0), output_zip_path=str(tmp_path / "a.zip"), fmk="pytorch")
    model = _model(0)
    with torch.no_grad():
        model.transformer.h[0].ln_1.weight[3] = torch.nextafter(model.transformer.h[0].ln_1.weight[3],
                                                                torch.tensor(2.0))
    ConfigChecker(model=model, output_zip_path=str(tmp_path / "b.zip"), fmk="pytorch")
    found = [d for d in _compare(tmp_path, tmp_path / "a.zip", tmp_path / "b.zip") if d["check"] == "weights"]
    assert [d["item"] for d in found] == ["transformer.h.0.ln_1.weight"]
    assert found[0]["note"] == "initial values differ"


def test_secrets_are_never_packed(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_do_not_leak_1234")
    monkeypatch.setenv("DB_PASSWORD", "pw_do_not_leak_5678")
    _train(tmp_path / "a.zip")
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        text = "".join(archive.read(name).decode() for name in archive.namelist())
    assert "hf_do_not_leak_1234" not in text and "pw_do_not_leak_5678" not in text and "hf_secret_value" not in text
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        env = json.loads(archive.read("environment.json"))
        hyper = json.loads(archive.read("hyperparameters.json"))
    assert env["HF_TOKEN"] == "******" and env["DB_PASSWORD"] == "******" and hyper["hf_token"] == "******"


def test_patches_come_out_and_training_is_unchanged(tmp_path):
    originals = (torch.utils.data.DataLoader.__iter__, torch.manual_seed, torch.randn,
                 torch.nn.functional.dropout)
    weights = []
    for packed in (False, True):
        model = _model(0)
        if packed:
            ConfigChecker.apply_patches("pytorch")
            ConfigChecker(model=model, output_zip_path=str(tmp_path / "p.zip"))
        loader = torch.utils.data.DataLoader(torch.arange(32).reshape(8, 4) % 50, batch_size=4)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(3)
        for batch in loader:
            model(batch, labels=batch).loss.backward()
            optimizer.step()
        ConfigChecker.remove_patches()
        weights.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*weights))
    assert originals == (torch.utils.data.DataLoader.__iter__, torch.manual_seed, torch.randn,
                         torch.nn.functional.dropout)


@pytest.mark.parametrize("content", [b"not a zip", b"PK\x05\x06" + b"\x00" * 18])
def test_a_file_that_is_not_a_pack_gives_one_error_line(tmp_path, capsys, content):
    (tmp_path / "bad.zip").write_bytes(content)
    ConfigChecker(output_zip_path=str(tmp_path / "ok.zip"))
    assert main(["-f", "pytorch", "config_check", "-c", str(tmp_path / "bad.zip"), str(tmp_path / "ok.zip"), "-o",
                 str(tmp_path / "out")]) == 1


def test_bad_fmk_is_one_config_error(tmp_path):
    from msprobe.core.errors import ConfigError

    with pytest.raises(ConfigError, match="fmk must be one of"):
        ConfigChecker(output_zip_path=str(tmp_path / "x.zip"), fmk="tensorflow")


def test_26x_dump_form_packs_the_launch_files_and_compares(tmp_path, monkeypatch):
    """`config_check -d launch.sh config.yaml -o pack.zip` (26.x's form) packs without a run; -c finds the change."""
    monkeypatch.chdir(tmp_path)
    for name, lr in (("a", "1e-4"), ("b", "3e-4")):
        (tmp_path / f"{name}.sh").write_text(f"python train.py --lr {lr} --batch_size 8\n")
        (tmp_path / f"{name}.yaml").write_text("optimizer:\n  betas: [0.9, 0.95]\n")
        output = ["-o", "a.zip"] if name == "a" else []  # b: the default ./config_check_pack.zip
        assert main(["config_check", "-d", f"{name}.sh", f"{name}.yaml", *output]) == 0
    with zipfile.ZipFile(tmp_path / "a.zip") as archive:
        assert json.loads(archive.read("meta.json"))["fmk"] == "pytorch"
        assert json.loads(archive.read("packages.json"))["torch"] == torch.__version__
    assert main(["config_check", "-c", "a.zip", "config_check_pack.zip"]) == 0  # default folder ./config_check_result
    [name] = [n for n in os.listdir(tmp_path / "config_check_result") if n.endswith(".json")]
    with open(tmp_path / "config_check_result" / name) as handle:
        differences = json.load(handle)["differences"]
    assert [(d["check"], d["a"], d["b"]) for d in differences if "lr" in d["item"]] == [
        ("hyperparameters", "1e-4", "3e-4")]
