"""free_benchmark judgement, preheat, settings and CSV: hand-computed tables."""
import math

import numpy as np
import pytest
import torch

from msprobe.core.errors import ConfigError
from msprobe.core.free_benchmark import judge
from msprobe.core.free_benchmark.csv_writer import FreeBenchmarkRow, ResultCsv
from msprobe.core.free_benchmark.preheat import Preheat
from msprobe.core.free_benchmark.settings import DEFAULT_MAX_SAMPLE, FreeBenchmarkSettings, mindspore_dump_key

INF, NAN = math.inf, math.nan


@pytest.mark.parametrize("a, b, tol, ratio, flipped", [
    ([1.0, 2.0], [1.0, 2.0], 1e-3, 1.0, False),
    ([1.0, 2.0], [1.0, 2.2], 1e-3, 1.1, False),          # max(|a|/|b|, |b|/|a|)
    ([1.1, 2.0], [1.0, 2.0], 1e-3, 1.1, False),
    ([1e-5, 1.0], [3e-5, 1.0], 1e-3, 1.0, False),        # both clamped at tol
    ([1e-5, 1.0], [2e-3, 1.0], 1e-3, 2.0, False),
    ([0.5, 1.0], [-0.5, 1.0], 1e-3, 1.0, True),           # a*b < -tol^2
    ([1e-4, 1.0], [-1e-4, 1.0], 1e-3, 1.0, False),        # product -1e-8 > -1e-6: not a flip
    ([INF, 1.0], [INF, 1.0], 1e-3, 1.0, False),           # the same inf agrees
    ([NAN, 1.0], [NAN, 1.25], 1e-3, 1.25, False),
    ([INF, 1.0], [1.0, 1.0], 1e-3, INF, False),
    ([NAN, 1.0], [1.0, 1.0], 1e-3, INF, False),
    ([], [], 1e-3, 1.0, False),
])
def test_compare_outputs_numpy_and_torch(a, b, tol, ratio, flipped):
    for make in (lambda v: np.array(v, dtype=np.float64), lambda v: torch.tensor(v, dtype=torch.float64)):
        got_ratio, got_flipped = judge.compare_outputs(make(a), make(b), tol)
        assert got_flipped is flipped
        assert got_ratio == pytest.approx(ratio)


def test_shape_mismatch_is_infinite():
    assert judge.compare_outputs(np.ones(2), np.ones(3), 1e-3) == (INF, False)


@pytest.mark.parametrize("dtype, mode, limit", [
    ("torch.float16", "bit_noise", 1.002), ("torch.bfloat16", "add_noise", 1.004), ("torch.float32", "", 1.0002),
    ("Float16", "improve_precision", 1.002), ("BFloat16", "", 1.004), ("torch.float64", "", 1.0002),
    ("torch.float16", "no_change", 1.0),
])
def test_thresholds(dtype, mode, limit):
    assert judge.threshold(dtype, mode) == limit


def test_tolerances():
    assert judge.tolerance("torch.float16") == 1e-3 and judge.tolerance("torch.bfloat16") == 1e-2
    assert judge.tolerance("torch.float32") == 1e-4 and judge.tolerance("torch.float16", "backward") == 1e-3


def test_verdict():
    assert judge.verdict(1.001, False, 1.002) is None
    assert judge.verdict(1.003, False, 1.002) == pytest.approx(0.003)
    assert judge.verdict(1.0, True, 1.002) == "symbol_flipping"
    assert judge.verdict(INF, False, 1.002) == INF


def test_preheat_samples_spread_over_steps_and_capped_by_max_sample():
    preheat = Preheat(preheat_step=3, max_sample=2)
    preheat.new_step(0)
    assert [preheat.take_sample("api") for _ in range(10)] == [False] * 10  # step 0 counts
    taken = []
    for step in (1, 2):
        preheat.new_step(step)
        taken.append([i for i in range(10) if preheat.take_sample("api")])
    assert taken == [[0, 1], [2, 3]]  # min(ceil(10 / 2), max_sample=2) per step, new calls each step


def test_preheat_thresholds():
    preheat = Preheat(preheat_step=3, max_sample=20)
    for ratio in (1.1, 1.3):
        preheat.record("sub", "float16", ratio, accurate=True)
    preheat.record("prod", "float16", 1.05, accurate=False)
    preheat.record("mix", "float16", 1.2, accurate=True)
    preheat.record("mix", "float16", 1.1, accurate=False)
    preheat.adapt(judge.threshold)
    assert preheat.threshold("sub", "float16", 1.002) == pytest.approx(1.6)    # 1 + 2 * 0.3
    assert preheat.threshold("prod", "float16", 1.002) == pytest.approx(1.002)  # stays at the default
    assert preheat.threshold("mix", "float16", 1.002) == pytest.approx(1.05)   # below the inaccurate 1.1
    assert preheat.threshold("other", "float16", 1.002) == 1.002


def test_settings_defaults_and_selection():
    settings = FreeBenchmarkSettings.from_section({})
    assert settings.max_sample == DEFAULT_MAX_SAMPLE == 20 and settings.pert_mode == "improve_precision"
    assert settings.selects("Torch.prod.0.forward", "Torch.prod")
    listed = FreeBenchmarkSettings.from_section({"list": ["relu"]})
    assert listed.selects("Functional.relu.3.forward", "Functional.relu")
    assert not listed.selects("Torch.prod.0.forward", "Torch.prod")
    scoped = FreeBenchmarkSettings.from_section({"scope": ["Torch.prod.1.forward"]})
    assert scoped.selects("Torch.prod.1.forward", "Torch.prod") and not scoped.selects("Torch.prod.0.forward",
                                                                                          "Torch.prod")


def test_mindspore_settings():
    settings = FreeBenchmarkSettings.from_section({"list": ["mindspore.ops.bmm", "mindspore.mint.nn.functional.relu",
                                                            "mindspore.Tensor.add", "mindspore.mint.sub"]},
                                                  "mindspore")
    assert settings.keys == {"Functional.bmm", "MintFunctional.relu", "Tensor.add", "Mint.sub"}
    assert mindspore_dump_key("mindspore.ops.prod") == "Functional.prod"
    for section, words in [({"list": ["bmm"]}, "full MindSpore API name"),
                           ({"pert_mode": "to_cpu", "fuzz_device": "cpu"}, "not available for MindSpore"),
                           ({"scope": ["Functional.bmm.0"]}, "scope is not available"),
                           ({"if_preheat": True}, "if_preheat is not available"),
                           ({"handler_type": "fix", "pert_mode": "to_cpu", "fuzz_device": "cpu"}, "to_cpu")]:
        with pytest.raises(ConfigError, match=words):
            FreeBenchmarkSettings.from_section(section, "mindspore")


def test_csv_appends_rows_after_one_header(tmp_path):
    out = ResultCsv(str(tmp_path / "a"))
    out.add(FreeBenchmarkRow(0, "bit_noise", "forward", 0, "Torch.prod.0.forward", 0.5, "torch.float16",
                             "torch.Size([8])"))
    out.flush()
    out.add(FreeBenchmarkRow(1, "bit_noise", "backward", 2, "Torch.prod.0.backward", "symbol_flipping",
                             "torch.float16", "torch.Size([8, 2])", 1))
    out.flush()
    assert (tmp_path / "a" / "free_benchmark.csv").read_text() == (
        "rank,pert_mode,stage,step,api_name,max_rel,dtype,shape,output_index\n"
        "0,bit_noise,forward,0,Torch.prod.0.forward,0.5,torch.float16,torch.Size([8]),\n"
        '1,bit_noise,backward,2,Torch.prod.0.backward,symbol_flipping,torch.float16,"torch.Size([8, 2])",1\n')
