"""Real tensor-mode dumps of a small torch model, made once per session with msprobe's PrecisionDebugger."""
import json
import os

import pytest


def _dump(root, seed):
    import torch

    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    config = os.path.join(root, f"config_{seed}.json")
    with open(config, "w") as handle:
        json.dump({"task": "tensor", "dump_path": os.path.join(root, f"dump_{seed}"), "level": "L1"}, handle)
    debugger = PrecisionDebugger(config_path=config)
    debugger.start(model=model)
    torch.manual_seed(100)  # the same input for both dumps
    model(torch.randn(2, 4)).sum().backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return os.path.join(root, f"dump_{seed}", "step0", "rank")


@pytest.fixture(scope="session")
def torch_dumps(tmp_path_factory):
    """(dump dir of seed 0, dump dir of seed 1): each with dump.json, stack.json, dump_tensor_data/*.pt."""
    root = str(tmp_path_factory.mktemp("parse_dumps"))
    return _dump(root, 0), _dump(root, 1)
