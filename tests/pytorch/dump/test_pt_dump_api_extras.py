"""debugger.save, module_dump/module_dump_end, seed_all and constructor overrides."""
import json
import random

import numpy as np
import pytest
import torch
import torch.nn as nn

from msprobe.core.errors import ConfigError, UnsupportedError
from msprobe.pytorch import PrecisionDebugger, module_dump, module_dump_end, seed_all
from msprobe.pytorch.seed import restore_dropout
from pt_dump_helpers import MLP, load_rank, write_config


def test_save_records_values_and_their_gradients(tmp_path):
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
    debugger.start()
    x = torch.randn(3, 2, requires_grad=True)
    h = x * 3
    PrecisionDebugger.save(h, "hidden")
    PrecisionDebugger.save({"lr": 0.1, "shape": torch.Size([3, 2]), "dtype": torch.float16}, "meta")
    h.sum().backward()
    debugger.stop()
    debugger.close()
    debug = json.loads((tmp_path / "dump" / "step0" / "rank" / "debug.json").read_text())
    data = debug["data"]
    assert data["hidden.0.debug"]["shape"] == [3, 2]
    assert data["hidden.0.debug"]["Max"] == pytest.approx(h.max().item())
    assert data["hidden_grad.0.debug"]["Max"] == 1.0 and data["hidden_grad.0.debug"]["Min"] == 1.0
    assert data["meta.0.debug"] == {"lr": {"type": "float", "value": 0.1},
                                    "shape": {"type": "torch.Size", "value": [3, 2]},
                                    "dtype": {"type": "torch.dtype", "value": "torch.float16"}}


def test_module_dump_records_only_that_module(tmp_path):
    model = MLP()
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
    debugger.start()
    x = torch.randn(2, 4) * 2
    module_dump(model.fc1, "first")
    hidden = model.fc1(x)
    module_dump_end()
    torch.relu(hidden).sum().backward()
    debugger.stop()
    debugger.close()
    names = set(load_rank(tmp_path / "dump")[0]["data"])
    assert {"Module.first.Linear.forward.0", "Module.first.Linear.backward.0", "Tensor.__mul__.0.forward",
            "Torch.relu.0.forward"} <= names
    assert not any(n.startswith("Functional.linear") for n in names)


def test_seed_all_makes_runs_repeatable_and_removes_dropout():
    try:
        seed_all(7, mode=True)
        a = (random.random(), np.random.rand(), torch.rand(2))
        seed_all(7, mode=True)
        b = (random.random(), np.random.rand(), torch.rand(2))
        assert a[0] == b[0] and a[1] == b[1] and torch.equal(a[2], b[2])
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
    seed_all(7)
    assert not torch.are_deterministic_algorithms_enabled()
    try:
        x = torch.ones(100)
        assert torch.equal(nn.Dropout(0.5).train()(x), x)
    finally:
        restore_dropout()
    assert not torch.equal(nn.Dropout(0.5).train()(x), x)
    seed_all(7, rm_dropout=False)
    assert not torch.equal(nn.Dropout(0.5).train()(x), x)
    with pytest.raises(ConfigError):
        seed_all(-1)


def test_constructor_overrides_and_errors(tmp_path):
    config = write_config(tmp_path, "statistics", "L1")
    debugger = PrecisionDebugger(config_path=config, task="tensor", dump_path=str(tmp_path / "other"), step=[0])
    assert debugger.config.task == "tensor" and debugger.config.step == [0]
    with pytest.raises(ConfigError, match="model"):
        PrecisionDebugger(config_path=config, level="L0").start()
    with pytest.raises(UnsupportedError):
        PrecisionDebugger(config_path=config, task="run_ut")


def test_dropout_is_recorded_under_seed_all_and_after_restore_dropout(tmp_path):
    # seed_all's p=0 dropout wraps F.dropout; an API table built while it is in place named only the wrapper, so
    # the function that reaches the dump (the original, called by the wrapper) was not recorded, during the patch
    # and after restore_dropout() alike (an RNG audit then missed every dropout of a later run)
    import torch.nn.functional as F

    from msprobe.pytorch.dump.api_names import api_table

    original = F.dropout
    seed_all(7)
    api_table.cache_clear()
    try:
        assert api_table().get(original) == "Functional.dropout"
        debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
        debugger.start()
        F.dropout(torch.ones(4), 0.5, training=True)
        debugger.stop()
        debugger.step()
        restore_dropout()
        assert F.dropout is original
        debugger.start()
        F.dropout(torch.ones(4), 0.5, training=True)
        debugger.stop()
        debugger.close()
    finally:
        restore_dropout()
        api_table.cache_clear()
    names = [list(load_rank(tmp_path / "dump", step)[0]["data"]) for step in (0, 1)]
    assert names == [["Functional.dropout.0.forward"], ["Functional.dropout.0.forward"]]
