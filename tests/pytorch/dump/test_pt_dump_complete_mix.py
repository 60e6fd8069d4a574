"""At mix every recorded forward that produced a grad-requiring output has its backward entry:
dropout (also with p=0, which returns its input unchanged) and the top model's modules whose output
is a HuggingFace ModelOutput."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from hf_models import tiny_gpt2, train_lm
from msprobe.pytorch import PrecisionDebugger
from pt_dump_helpers import load_rank, write_config


def _forwards_without_backward(data, prefixes):
    missing = []
    for name in data:
        if not name.startswith(prefixes):
            continue
        if name.startswith("Module.") and ".forward." in name:
            if name.replace(".forward.", ".backward.") not in data:
                missing.append(name)
        elif name.endswith(".forward") and name[: -len("forward")] + "backward" not in data:
            missing.append(name)
    return missing


@pytest.mark.parametrize("dropout", [0.1, 0.0])
def test_gpt2_mix_has_dropout_and_top_module_backward(tmp_path, dropout):
    torch.manual_seed(0)
    model = tiny_gpt2(dropout)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "mix"), model=model)
    train_lm(model, debugger, steps=1)
    debugger.close()
    data = load_rank(tmp_path / "dump")[0]["data"]
    dropouts = [n for n in data if n.startswith("Functional.dropout.") and n.endswith(".forward")]
    assert len(dropouts) >= 5  # embedding, and per layer after attention and after the MLP
    assert "Module.transformer.GPT2Model.backward.0" in data
    assert not _forwards_without_backward(data, ("Module.", "Functional.dropout", "Functional.linear"))
    if dropout == 0.0:  # the input comes back unchanged: its grad is the output's grad
        entry = data["Module.transformer.drop.Dropout.backward.0"]
        assert entry["output"][0]["Norm"] == entry["input"][0]["Norm"]


class DictOutput(nn.Module):
    """A small model whose submodule returns a dict and passes its input through a p=0 dropout."""

    def __init__(self):
        super().__init__()
        self.body = Body()
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        return self.head(self.body(x)["hidden"])


class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 6)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        return {"hidden": self.drop(F.relu(self.lin(x))), "note": "unused"}


def test_small_model_with_dict_output_and_identity_dropout(tmp_path):
    torch.manual_seed(0)
    model = DictOutput()
    x = torch.randn(3, 4)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "tensor", "mix"), model=model)
    debugger.start()
    model(x).pow(2).sum().backward()
    debugger.stop()
    debugger.close()
    data = load_rank(tmp_path / "dump")[0]["data"]
    assert not _forwards_without_backward(data, ("Module.", "Functional."))
    body = data["Module.body.Body.backward.0"]
    assert len(body["input"]) == 2 and body["input"][1] is None  # grads of the dict's values
    files = tmp_path / "dump" / "step0" / "rank" / "dump_tensor_data"
    hidden = F.relu(model.body.lin(x)).detach().requires_grad_()
    want = torch.autograd.grad(model.head(hidden).pow(2).sum(), hidden)[0]
    torch.testing.assert_close(torch.load(files / body["input"][0]["data_name"]), want)
    dropout = data["Functional.dropout.0.backward"]
    torch.testing.assert_close(torch.load(files / dropout["output"][0]["data_name"]), want)
