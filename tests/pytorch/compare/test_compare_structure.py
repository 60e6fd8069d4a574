"""Structure before values (issue 40, findings 1, 2, 3, 5, 8): real transformers 5 models (Qwen2, Phi3,
Mistral, built from configs) dumped bf16 against fp32 with one structural fault planted on the NPU side:
an inserted call, a removed call, a swapped module, a changed sdpa scale, F.gelu's approximation. The
advisor's reason names the structural difference first; calls are paired within their parent module; the
terminal summary counts calls with differing arguments; the graph's "first" badge is the advisor's suspect."""
import json
import logging
import os

import pytest

import structural_models as sm
from msprobe.core.compare import CompareOptions, compare_tables
from msprobe.core.compare.advisor import advisor_text
from msprobe.core.io.load import load_dump
from msprobe.core.compare.render import summary_text
from msprobe.core.compare.structure import call_parents

MODELS = {"qwen2": sm.tiny_qwen2, "phi3": sm.tiny_phi3, "mistral": sm.tiny_mistral}
FAULTS = {"clean": (None, None), "insert": (sm.insert_call, None), "remove": (sm.remove_call, None),
          "swap": (sm.swap_module, None), "scale": (sm.change_scale, None),
          "gelu": (sm.gelu_approximate, sm.exact_gelu)}


def _quiet_pair(root, build, npu_edit, bench_edit, level="mix"):
    """sm.dump_pair with msprobe's log quiet while dumping (the level of later tests is theirs)."""
    saved = logging.getLogger("msprobe").level
    logging.getLogger("msprobe").setLevel(logging.WARNING)
    try:
        return sm.dump_pair(root, build, npu_edit, bench_edit, level=level)
    finally:
        logging.getLogger("msprobe").setLevel(saved)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """(model, fault) -> (NPU dump.json, bench dump.json), dumped on first use."""
    root, made = tmp_path_factory.mktemp("structure"), {}

    def get(model, fault):
        if (model, fault) not in made:
            made[model, fault] = _quiet_pair(str(root / f"{model}_{fault}"), MODELS[model], *FAULTS[fault])
        return made[model, fault]
    return get


def _records(pairs, model, fault):
    npu, bench = pairs(model, fault)
    return compare_tables(load_dump(npu), load_dump(bench), CompareOptions(progress=False))


def _reason(records):
    return advisor_text(records).splitlines()[2]


def _assert_named_first(records, kind, text):
    """The advisor's reason starts with the structural difference `text` of `kind`; no data-loader advice."""
    reason = _reason(records)
    assert reason.startswith("Reason: structural difference: " + text), reason
    assert records.suspect.kind == kind and "data loader" not in advisor_text(records)


def _parents(dump_json):
    with open(os.path.join(os.path.dirname(dump_json), "construct.json")) as handle:
        return json.load(handle)


@pytest.mark.parametrize("model", list(MODELS))
def test_a_clean_bf16_port_has_no_structural_difference_and_no_suspect(pairs, model):
    records = _records(pairs, model, "clean")
    assert records.suspect is None, advisor_text(records)
    assert "0 calls with differing arguments, 0 structural differences" in summary_text(records)


@pytest.mark.parametrize("model", list(MODELS))
def test_an_inserted_call_is_named_as_an_extra_call_in_its_module(pairs, model):
    records = _records(pairs, model, "insert")
    _assert_named_first(records, "extra", "an extra Tensor.__mul__ inside model.layers.1.self_attn on the NPU side")
    assert records.suspect.phase == "forward"
    # every paired call sits in the same parent module on both sides (construct.json, read here directly)
    npu_json, bench_json = pairs(model, "insert")
    parents_n, parents_b = _parents(npu_json), _parents(bench_json)
    npu_entries, bench_entries = records.npu.columns["entry"], records.bench.columns["entry"]
    checked = 0
    for i, j in zip(records.npu_pos.tolist(), records.bench_pos.tolist()):
        if i >= 0 and j >= 0 and not npu_entries[i].startswith("Module.") and npu_entries[i] in parents_n:
            assert parents_n[npu_entries[i]] == parents_b[bench_entries[j]], (npu_entries[i], bench_entries[j])
            checked += 1
    assert checked > 100
    # the NPU's extra call has no counterpart; the one after it pairs across the shifted counter
    extra = records.suspect.entry
    assert parents_n[extra].startswith("Module.model.layers.1.self_attn.")
    assert all(j < 0 for e, j in zip(records.entries, records.bench_pos.tolist()) if e == extra)


def test_without_a_module_tree_calls_pair_by_their_call_site(pairs, tmp_path):
    """Level L1 (no construct.json parents): the stack's innermost model frame is the parent."""
    npu, bench = _quiet_pair(str(tmp_path / "l1"), sm.tiny_qwen2, sm.insert_call, None, level="L1")
    records = compare_tables(load_dump(npu), load_dump(bench), CompareOptions(progress=False))
    _assert_named_first(records, "extra", "an extra Tensor.__mul__ called from forward in structural_models.py")
    # the extra call's parent is its call site, this file's wrapper (no module tree at L1)
    assert call_parents(records.npu)[records.suspect.entry].startswith("stack:structural_models.py:forward:")


@pytest.mark.parametrize("model", list(MODELS))
def test_a_removed_call_is_named_as_a_missing_call_in_its_module(pairs, model):
    records = _records(pairs, model, "remove")
    _assert_named_first(records, "missing", "a missing Tensor.__mul__ inside model.layers.1.post_attention_layernorm: "
                                            "the bench side calls it")
    assert records.npu_pos[records.suspect.row] < 0


@pytest.mark.parametrize("model", ["qwen2", "phi3", "mistral"])
def test_a_swapped_activation_module_is_named(pairs, model):
    records = _records(pairs, model, "swap")
    attr = "activation_fn" if model == "phi3" else "act_fn"
    _assert_named_first(records, "swapped", f"module model.layers.0.mlp.{attr} is GELU on the NPU side and "
                                            f"SiLUActivation on the bench side")


@pytest.mark.parametrize("model", list(MODELS))
def test_a_changed_sdpa_scale_is_named_though_every_value_is_within_tolerance(pairs, model):
    records = _records(pairs, model, "scale")
    head_dim = sm.HIDDEN // 4
    suspect = records.suspect
    assert suspect is not None and suspect.name.startswith("Functional.scaled_dot_product_attention.1.forward")
    assert suspect.name.endswith("input.scale"), advisor_text(records)
    npu_value, bench_value = (records.column(side, "value")[suspect.row] for side in ("npu", "bench"))
    assert npu_value == pytest.approx(head_dim ** -0.5 * 1.01) and bench_value == pytest.approx(head_dim ** -0.5)
    text = summary_text(records)
    assert "1 calls with differing arguments" in text and "suspect: none" not in text
    assert "is called with another argument inside model.layers.1.self_attn: input.scale" in _reason(records)


@pytest.mark.parametrize("model", list(MODELS))
def test_gelu_approximation_argument_is_named(pairs, model):
    records = _records(pairs, model, "gelu")
    reason = _reason(records)
    assert "input.approximate is tanh on the NPU side, none on the bench side" in reason, reason
    assert records.suspect.kind == "argument"
    assert "1 calls with differing arguments" in summary_text(records)


@pytest.mark.parametrize("fault", ["insert", "remove", "swap", "scale"])
def test_the_graph_first_badge_is_the_advisors_suspect(pairs, fault):
    from msprobe.visualization import graph_verdict

    npu_json, bench_json = pairs("qwen2", fault)
    records = _records(pairs, "qwen2", fault)
    verdict = graph_verdict(os.path.dirname(npu_json), os.path.dirname(bench_json))
    assert verdict.suspect == records.suspect.name
    assert verdict.first_node is not None and verdict.first_node == verdict.suspect_node == verdict.worst_node
    expected = {"insert": records.suspect.entry, "scale": "Functional.scaled_dot_product_attention.1.forward",
                "swap": "Module.model.layers.0.mlp.act_fn.GELU.forward.0",
                "remove": "Module.model.layers.1.post_attention_layernorm.Qwen2RMSNorm.forward.0"}[fault]
    assert verdict.first_node == expected


def test_a_clean_graph_has_no_first_badge(pairs):
    from msprobe.visualization import graph_verdict

    npu_json, bench_json = pairs("qwen2", "clean")
    verdict = graph_verdict(os.path.dirname(npu_json), os.path.dirname(bench_json))
    assert verdict.first_node is None and verdict.worst_node is None


def test_a_missing_call_without_a_module_tree_badges_the_call_before_it(tmp_path):
    """Level L1: no module holds the missing call (the bench side's extra `* 1.01` after attention); the
    badge goes on the NPU call just before it, attention's output projection."""
    from msprobe.visualization import graph_verdict

    npu, bench = _quiet_pair(str(tmp_path / "l1"), sm.tiny_qwen2, None, sm.insert_call, level="L1")
    records = compare_tables(load_dump(npu), load_dump(bench), CompareOptions(progress=False))
    assert records.suspect.kind == "missing" and records.npu_pos[records.suspect.row] < 0, records.suspect.summary
    verdict = graph_verdict(os.path.dirname(npu), os.path.dirname(bench))
    assert verdict.suspect == records.suspect.name
    assert verdict.first_node == verdict.suspect_node == verdict.worst_node
    assert verdict.first_node.startswith("Functional.linear."), verdict.first_node
