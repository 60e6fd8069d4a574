"""MsprobeTrainerCallback in a real transformers.Trainer run and MsprobeLightningCallback in a real Lightning run:
the dumps equal those of start/stop placed by hand at the same points, and forward statistics match a forward
recomputed outside any trainer."""
import json
import os

import torch
import transformers

from msprobe.pytorch.integrations import MsprobeLightningCallback, MsprobeTrainerCallback


def _config(tmp_path, name, steps=(0, 1)):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"task": "statistics", "level": "mix", "dump_path": str(tmp_path / name),
                                "step": list(steps)}))
    return str(path)


def _gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=40, n_positions=16)
    return transformers.GPT2LMHeadModel(config)


def _dataset():
    return [{"input_ids": torch.arange(n, n + 8) % 40, "labels": torch.arange(n, n + 8) % 40} for n in range(12)]


def _dump(root, step):
    with open(os.path.join(root, f"step{step}", "rank", "dump.json")) as handle:
        return json.load(handle)["data"]


def _trainer(tmp_path, callback):
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "hf"), max_steps=3, per_device_train_batch_size=4,
                                          report_to=[], use_cpu=True, save_strategy="no", logging_strategy="no",
                                          seed=0, data_seed=0, dataloader_num_workers=0)
    return transformers.Trainer(model=_gpt2(), args=args, train_dataset=_dataset(), callbacks=[callback])


class _ByHand(transformers.TrainerCallback):
    """start/stop placed by hand at the same points of the step."""

    def __init__(self, config_path):
        from msprobe.pytorch import PrecisionDebugger

        self.debugger = PrecisionDebugger(config_path=config_path)

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self.debugger.start(model)

    def on_step_end(self, args, state, control, **kwargs):
        self.debugger.stop()
        self.debugger.step()


def test_trainer_callback_dump_equals_start_stop_by_hand(tmp_path):
    by_hand = _ByHand(_config(tmp_path, "by_hand"))
    _trainer(tmp_path, by_hand).train()
    by_hand.debugger.close()
    trainer = _trainer(tmp_path, MsprobeTrainerCallback(config_path=_config(tmp_path, "callback")))
    trainer.train()
    for step in (0, 1):
        assert _dump(tmp_path / "callback", step) == _dump(tmp_path / "by_hand", step)
    assert sorted(os.listdir(tmp_path / "callback")) == ["step0", "step1"]
    # the first step's forward, recomputed outside any trainer: the embedding output of the first batch
    data = _dump(tmp_path / "callback", 0)
    [wte] = [v for k, v in data.items() if k.startswith("Module.transformer.wte.Embedding.forward.")]
    batch = trainer.get_train_dataloader()
    model = _gpt2()
    first = next(iter(batch))["input_ids"]
    with torch.no_grad():
        expected = model.transformer.wte(first)
    assert wte["output"][0]["shape"] == list(expected.shape)
    assert abs(wte["output"][0]["Max"] - float(expected.max())) < 1e-6
    # the hooks are gone after training: a forward adds nothing to the dump
    assert not model._forward_hooks and not trainer.model._forward_hooks


def test_trainer_callback_runs_trainer_mon_and_removes_it(tmp_path, monitor_output):
    monitor_config = tmp_path / "monitor.json"
    monitor_config.write_text(json.dumps({"targets": {}, "wg_distribution": True, "format": "csv",
                                          "ops": ["norm"], "start_step": 0, "step_interval": 1}))
    trainer = _trainer(tmp_path, MsprobeTrainerCallback(monitor_config=str(monitor_config)))
    step_before = torch.optim.AdamW.step
    trainer.train()
    csvs = [os.path.join(d, f) for d, _, fs in os.walk(monitor_output) for f in fs if f.endswith(".csv")]
    assert any("grad" in os.path.basename(p) for p in csvs), csvs
    assert torch.optim.AdamW.step is step_before


def test_lightning_callback_dump_equals_start_stop_by_hand(tmp_path):
    import lightning

    class Module(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = _gpt2()

        def training_step(self, batch, batch_idx):
            return self.model(input_ids=batch["input_ids"], labels=batch["labels"]).loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class ByHand(lightning.Callback):
        def __init__(self, config_path):
            from msprobe.pytorch import PrecisionDebugger

            self.debugger = PrecisionDebugger(config_path=config_path)

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self.debugger.start(pl_module)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.debugger.stop()
            self.debugger.step()

    def fit(callback):
        torch.manual_seed(0)
        loader = torch.utils.data.DataLoader(_dataset(), batch_size=4, shuffle=False)
        trainer = lightning.Trainer(max_steps=3, accelerator="cpu", devices=1, logger=False,
                                    enable_checkpointing=False, enable_progress_bar=False,
                                    enable_model_summary=False, callbacks=[callback],
                                    default_root_dir=str(tmp_path / "pl"))
        trainer.fit(Module(), loader)
        return callback

    fit(ByHand(_config(tmp_path, "by_hand"))).debugger.close()
    fit(MsprobeLightningCallback(config_path=_config(tmp_path, "callback")))
    for step in (0, 1):
        assert _dump(tmp_path / "callback", step) == _dump(tmp_path / "by_hand", step)
    assert any(key.startswith("Module.model.transformer.h.0") for key in _dump(tmp_path / "callback", 0))
