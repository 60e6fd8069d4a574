"""free_benchmark on bfloat16: one-ulp noise is judged at its own size (a clean bf16 Llama is not flagged,
a cancelling subtraction still is), and every run says what it checked, found and fixed, with a CSV."""
import logging
import os
import re
import sys

import pytest
import torch

from fb_helpers import read_rows, write_config
from msprobe.core.free_benchmark import judge
from msprobe.core.free_benchmark.csv_writer import HEADER
from msprobe.pytorch import PrecisionDebugger

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "visualization"))
from llama_dumps import tiny_llama  # noqa: E402


def _summary(caplog):
    lines = [r.getMessage() for r in caplog.records if "msprobe free_benchmark step" in r.getMessage()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("mode", ["add_noise", "bit_noise"])
def test_noise_on_a_clean_bf16_llama_flags_nothing_and_says_so(tmp_path, caplog, mode):
    model = tiny_llama().to(torch.bfloat16)
    ids = torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(1))
    debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), {"pert_mode": mode}), model=model)
    with caplog.at_level(logging.INFO, logger="msprobe"):
        debugger.start()
        model(input_ids=ids, labels=ids).loss.backward()
        debugger.stop()
        debugger.step()
    # the CSV exists with 1.2.1's header and no row (1.2.1 flagged ~80 of these calls, reshape included)
    assert read_rows(str(tmp_path)) == []
    with open(os.path.join(str(tmp_path), "out", "free_benchmark.csv")) as handle:
        assert handle.read() == ",".join(HEADER) + "\n"
    line = _summary(caplog)
    calls, apis = map(int, re.search(r"checked (\d+) call\(s\) of (\d+) API\(s\)", line).groups())
    assert calls >= 60 and 10 <= apis <= calls and "0 flagged" in line and mode in line


def test_bf16_noise_still_flags_a_cancelling_subtraction(tmp_path, caplog):
    b = (torch.full((16,), 1.0) + torch.arange(16) * 2 ** -5).bfloat16()
    a = b + 4 * 2 ** -7  # 4 bf16 ulps apart: a - b is exact, one flipped bit of a moves it by 25 %
    debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), {"pert_mode": "bit_noise"}))
    with caplog.at_level(logging.INFO, logger="msprobe"):
        debugger.start()
        diff = a - b
        torch.exp(a) * 2
        debugger.stop()
        debugger.step()
    rows = read_rows(str(tmp_path))
    assert [r["api_name"] for r in rows] == ["Tensor.__sub__.0.forward"] and rows[0]["dtype"] == "torch.bfloat16"
    assert diff.dtype == torch.bfloat16
    assert "checked 3 call(s) of 3 API(s)" in _summary(caplog) and "1 flagged" in _summary(caplog)


def test_noise_size_is_measured_in_ulps_of_the_tensor_scale():
    eps = 2.0 ** -7
    base = torch.tensor([1.0, -0.5, 0.01, 2.0])
    # 3 ulps of the element (or of the rms for the small one): noise; 12 ulps: not
    rms = base.pow(2).mean().sqrt()
    small = base + 3 * eps * torch.maximum(base.abs(), rms)
    large = base + 12 * eps * torch.maximum(base.abs(), rms)
    assert judge.noise_sized(small, base, eps) and not judge.noise_sized(large, base, eps)
    assert judge.compare_outputs(small, base, 1e-2, eps) == (1.0, False)
    assert judge.compare_outputs(large, base, 1e-2, eps)[0] > 1.004
    assert judge.noise_epsilon("torch.bfloat16", "add_noise") == eps
    assert judge.noise_epsilon("torch.bfloat16", "improve_precision") is None


def test_fix_mode_says_how_many_calls_it_fixed(tmp_path, caplog):
    torch.manual_seed(5)
    factors = (1 + 0.01 * torch.rand(8, 256)).half()
    section = {"handler_type": "fix", "pert_mode": "improve_precision", "list": ["prod"]}
    debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), section))
    with caplog.at_level(logging.INFO, logger="msprobe"):
        debugger.start()
        torch.prod(factors, dim=1)
        torch.prod(factors[:4], dim=1)
        torch.exp(factors)
        debugger.stop()
        debugger.step()
    line = _summary(caplog)
    assert "checked 2 call(s) of 1 API(s)" in line and "fixed 2 call(s)" in line and "fix mode" in line


def test_noise_does_not_flag_a_histogram_count(tmp_path, caplog):
    """Mixtral's router counts tokens per expert with torch.histc: a one-ulp nudge that moves a value
    across a bin edge changes a count by a whole unit (max_rel 1e5 was reported). Counts are not
    fragile float results; the cancelling subtraction next to it still is."""
    below_edge = torch.nextafter(torch.tensor(2.25), torch.tensor(0.0)).item()  # one ulp under a bin edge
    values = torch.tensor([0.0, 1.0, 1.0, below_edge, 3.0, 3.0, 3.0, 1.5])
    b = (torch.full((16,), 1.0) + torch.arange(16) * 2 ** -5).bfloat16()
    a = b + 4 * 2 ** -7
    debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), {"pert_mode": "add_noise"}))
    with caplog.at_level(logging.INFO, logger="msprobe"):
        debugger.start()
        counts = torch.histc(values, bins=4, min=0, max=3)
        a - b
        debugger.stop()
        debugger.step()
    assert counts.tolist() == [1.0, 2.0, 2.0, 3.0]  # bins [0, .75) [.75, 1.5) [1.5, 2.25) [2.25, 3]
    rows = read_rows(str(tmp_path))
    assert [r["api_name"] for r in rows] == ["Tensor.__sub__.0.forward"], rows
    assert any("Torch.histc" in r.getMessage() and "counts elements" in r.getMessage() for r in caplog.records)
