"""MindSpore mixed pairs: mindspore-probe 26.2.0's MindSpore dumps (tests/fixtures/ms26x/mindspore, made by
make_fixtures.py with mint.norm replaced, since 26.2.0 cannot dump on CPU otherwise) against msprobe's dumps of
the same network, made here."""
import json
import os
import sys

import numpy as np
import pytest

from msprobe.core.compare import CompareOptions, compare_tables
from msprobe.core.io.load import find_dump_file, load_dump
from msprobe.core.io.normalise import TOOL_MSPROBE, TOOL_REFERENCE

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "ms26x")
sys.path.insert(0, FIXTURES)
import ms_model  # noqa: E402

SPECS = {"ms_stats_l1_clean": ("L1", None), "ms_stats_l1_gelu_tanh": ("L1", "gelu_tanh"),
         "ms_stats_mix_clean": ("mix", None)}


@pytest.fixture(scope="module")
def ours(ms, tmp_path_factory):
    root = tmp_path_factory.mktemp("ms26x_ours")
    return {name: _ours(str(root / name), *spec) for name, spec in SPECS.items()}


def _ours(out, level, fault):
    from msprobe.mindspore import PrecisionDebugger

    os.makedirs(out, exist_ok=True)
    config_path = os.path.join(out, "config.json")
    with open(config_path, "w") as handle:
        json.dump({"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": level,
                   "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}, handle)
    net = ms_model.build(fault)
    debugger = PrecisionDebugger(config_path=config_path)
    ms_model.train_step(net, lambda: debugger.start(net), debugger.stop)
    debugger.step()
    debugger.close()
    return os.path.join(out, "step0", "rank", "dump.json")


def theirs(name):
    return find_dump_file(os.path.join(FIXTURES, "mindspore", name))


def _compare(npu, bench):
    records = compare_tables(load_dump(npu), load_dump(bench), CompareOptions(progress=False))
    return records, records.suspect


def test_our_mindspore_dump_passes_unchanged_and_26x_is_recognised(ours):
    assert load_dump(ours["ms_stats_l1_clean"]).header["tool"] == TOOL_MSPROBE
    assert load_dump(theirs("ms_stats_l1_clean")).header["tool"] == TOOL_REFERENCE


def test_backward_outputs_listed_last_argument_first_are_put_in_argument_order(ours):
    """26.2.0 lists LayerNorm's gradients as [beta, gamma, x] and BiasAdd's as [bias, x]: in the record each is
    the gradient of its argument, so the two tools' Max and Min (the same numbers) agree slot by slot."""
    records, suspect = _compare(theirs("ms_stats_l1_clean"), ours["ms_stats_l1_clean"])
    checked = 0
    for row, name in enumerate(records.names):
        if ".backward.output." in name and records.npu_pos[row] >= 0 and records.bench_pos[row] >= 0 \
                and records.column("npu", "kind")[row] == "tensor":
            assert records.npu_stats[row, :2].tolist() == records.bench_stats[row, :2].tolist(), name
            checked += 1
    assert checked >= 6
    assert "Primitive.layer_norm.LayerNorm.0.backward.output.2" in records.names
    assert suspect is None and not records.judgement.suspicious.any()
    assert (records.npu_pos >= 0).all() and (records.bench_pos >= 0).all()  # every row has a counterpart


@pytest.mark.parametrize("npu_side", ["theirs", "ours"])
def test_mixed_pair_names_the_fault_as_a_same_tool_pair(ours, npu_side):
    _, same = _compare(ours["ms_stats_l1_gelu_tanh"], ours["ms_stats_l1_clean"])
    assert same is not None and same.entry == "Functional.gelu.0.forward"
    if npu_side == "theirs":
        records, suspect = _compare(theirs("ms_stats_l1_gelu_tanh"), ours["ms_stats_l1_clean"])
    else:
        records, suspect = _compare(ours["ms_stats_l1_gelu_tanh"], theirs("ms_stats_l1_clean"))
    assert suspect is not None and (suspect.entry, suspect.kind) == (same.entry, same.kind)
    assert np.count_nonzero(records.judgement.suspicious) >= 20


def test_mix_level_mixed_pair_matches_every_row(ours):
    records, suspect = _compare(theirs("ms_stats_mix_clean"), ours["ms_stats_mix_clean"])
    assert (records.npu_pos >= 0).all() and (records.bench_pos >= 0).all()
    assert any(name.startswith("Cell.") for name in records.names)
    assert suspect is None and not records.judgement.suspicious.any()
