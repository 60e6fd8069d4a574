"""API names as msprobe 1.2.1 writes them: operators as Tensor.__mul__, torch._VF functions as VF.*;
the API list fails loudly when it cannot be read."""
import os

import pytest
import torch
import torch.nn as nn

from msprobe.core.errors import MsprobeError, ParseError
from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.dump import api_names
from pt_dump_helpers import load_rank, write_config

# msprobe 1.2.1's API list (data/pytorch/hook_module/support_wrap_ops.yaml), vendored: a fresh clone has no reference tree
REFERENCE_YAML = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "fixtures",
                              "reference_1.2.1", "support_wrap_ops.yaml")


class Operators(nn.Module):
    """Every operator form once, then the method forms of two of them, then an LSTM."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        self.lstm = nn.LSTM(4, 3, batch_first=True)

    def forward(self, a, b):
        x = a * b            # Tensor.__mul__
        x = x + b            # Tensor.__add__
        x = x @ self.w       # Tensor.__matmul__
        x = b - x            # Tensor.__sub__
        x = x / 2            # Tensor.__truediv__
        x = 2 * x            # Tensor.__rmul__
        x += b               # Tensor.__iadd__
        x = x ** 2           # Tensor.__pow__
        x = x.mul(a).pow(1)  # the methods keep their own names
        out, _ = self.lstm(x.unsqueeze(0))
        return out


EXPECTED_ORDER = ["Tensor.__mul__.0.forward", "Tensor.__add__.0.forward", "Tensor.__matmul__.0.forward",
                  "Tensor.__sub__.0.forward", "Tensor.__truediv__.0.forward", "Tensor.__rmul__.0.forward",
                  "Tensor.__iadd__.0.forward", "Tensor.__pow__.0.forward", "Tensor.mul.0.forward",
                  "Tensor.pow.0.forward", "VF.lstm.0.forward"]


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_operators_and_vf_functions_have_the_reference_names(tmp_path, level):
    torch.manual_seed(0)
    model = Operators()
    a, b = torch.randn(5, 4, requires_grad=True), torch.randn(5, 4)
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", level), model=model)
    debugger.start()
    model(a, b).sum().backward()
    debugger.stop()
    debugger.close()
    data = load_rank(tmp_path / "dump")[0]["data"]
    recorded = [name for name in data if name in EXPECTED_ORDER]
    assert recorded == EXPECTED_ORDER
    assert not any(name.startswith(("Torch.lstm", "Tensor.add.", "Tensor.matmul", "Tensor.sub.", "Tensor.div."))
                   for name in data)
    assert "Tensor.__mul__.0.backward" in data and "VF.lstm.0.backward" in data
    mul = data["Tensor.__mul__.0.forward"]
    assert mul["output"][0]["Norm"] == pytest.approx(torch.linalg.norm(a * b).item(), rel=1e-6)
    if level == "mix":
        assert "Module.lstm.LSTM.forward.0" in data


def test_every_operator_name_we_write_is_in_the_reference_list_or_reflected():
    reference = api_names.load_api_lists(REFERENCE_YAML)["tensor"]
    ours = api_names.operator_names()
    assert {"__mul__", "__add__", "__sub__", "__truediv__", "__matmul__", "__radd__", "__rmul__", "__iadd__",
            "__imul__", "__isub__", "__pow__"} <= set(ours)
    assert set(ours) - set(reference) <= set(api_names._REFLECTED)
    assert api_names.api_table()[torch._VF.lstm] == "VF.lstm"
    assert len(api_names.api_table()) > 1000


def test_operators_are_unwrapped_after_stop(tmp_path):
    originals = {name: torch.Tensor.__dict__.get(name) for name in api_names.operator_names()}
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
    debugger.start()
    assert torch.Tensor.__mul__ is not torch._C.TensorBase.__mul__
    x = torch.ones(2)
    assert hash(x) == id(x) and {x: 1}[x] == 1  # wrapping __eq__ keeps tensors hashable
    wrapper = torch.Tensor.__mul__
    debugger.stop()
    debugger.step()
    assert torch.Tensor.__mul__ is torch._C.TensorBase.__mul__
    debugger.start()  # the same wrappers each window (built once a process), the same names
    assert torch.Tensor.__mul__ is wrapper
    x * x
    debugger.stop()
    debugger.close()
    assert {name: torch.Tensor.__dict__.get(name) for name in originals} == originals
    assert torch.Tensor.__mul__ is torch._C.TensorBase.__mul__
    second = load_rank(tmp_path / "dump", 1)[0]["data"]
    assert "Tensor.__mul__.0.forward" in second


@pytest.mark.parametrize("content,message", [
    ("tensor: [add\n  - : :\n", "cannot be loaded"),
    ("functional: [linear]\n", "lacks the name lists"),
    ("- just\n- a list\n", "lacks the name lists"),
    ("!!python/object/apply:os.system ['echo pwned']\n", "cannot be loaded"),
])
def test_a_broken_api_list_is_an_error(tmp_path, content, message):
    path = tmp_path / "support_wrap_ops.yaml"
    path.write_text(content)
    with pytest.raises(ParseError, match=message) as caught:
        api_names.load_api_lists(str(path))
    assert "\n" not in str(caught.value)


def test_the_debugger_refuses_a_broken_packaged_list(tmp_path, monkeypatch):
    broken = tmp_path / "support_wrap_ops.yaml"
    broken.write_text("functional: [linear\n")
    monkeypatch.setattr(api_names, "SUPPORT_YAML", str(broken))
    api_names._reference_lists.cache_clear()
    api_names.api_table.cache_clear()
    try:
        with pytest.raises(MsprobeError, match="API list"):
            PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1"))
    finally:
        monkeypatch.undo()
        api_names._reference_lists.cache_clear()
        api_names.api_table.cache_clear()
    assert len(api_names.api_table()) > 1000
