"""Mixed pairs: mindstudio-probe 26.2.0's dumps (tests/fixtures/ms26x, made by make_fixtures.py) against msprobe's
dumps of the same model and step, made here; they match and judge like a same-tool pair (normalise.py)."""
import ast
import inspect
import os
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from msprobe.core.compare import CompareOptions, compare_tables
from msprobe.core.compare.advisor import find_suspect
from msprobe.core.compare.reasons import Reason
from msprobe.core.compare.render import render_result
from msprobe.core.compare.tolerance import judge_rows
from msprobe.core.errors import CompareError
from msprobe.core.io.arg_schemas import FUNCTIONAL_SCHEMAS
from msprobe.core.io.load import find_dump_file, load_dump
from msprobe.core.io.normalise import TOOL_MSPROBE, TOOL_REFERENCE, normalise_dump

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "ms26x")
sys.path.insert(0, FIXTURES)
import gpt2_model  # noqa: E402

TENSOR_LIST = ["gelu", "layer_norm", "cross_entropy"]  # make_fixtures.py's tensor dumps
OURS = {"stats_l1_clean": ("statistics", "L1", None, torch.float32, None),
        "stats_l1_gelu_tanh": ("statistics", "L1", "gelu_tanh", torch.float32, None),
        "stats_l1_bf16": ("statistics", "L1", None, torch.bfloat16, None),
        "stats_mix_clean": ("statistics", "mix", None, torch.float32, None),
        "tensor_l1_clean": ("tensor", "L1", None, torch.float32, TENSOR_LIST),
        "tensor_l1_gelu_tanh": ("tensor", "L1", "gelu_tanh", torch.float32, TENSOR_LIST)}


def _ours(out, task, level, fault, dtype, names):
    import json

    from msprobe.pytorch import PrecisionDebugger

    section = {"scope": [], "list": names or [], "data_mode": ["all"], "summary_mode": "statistics"}
    os.makedirs(out, exist_ok=True)
    config_path = os.path.join(out, "config.json")
    with open(config_path, "w") as handle:
        json.dump({"task": task, "dump_path": out, "rank": [], "step": [], "level": level, task: section}, handle)
    model = gpt2_model.build(fault, dtype)
    optimizer = gpt2_model.optimizer_of(model)
    debugger = PrecisionDebugger(config_path=config_path, model=model)
    gpt2_model.train_step(model, optimizer, gpt2_model.token_ids(), debugger.start, debugger.stop)
    debugger.step()
    debugger.close()
    return os.path.join(out, "step0", "rank", "dump.json")


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    root = tmp_path_factory.mktemp("ms26x_ours")
    return {name: _ours(str(root / name), *spec) for name, spec in OURS.items()}


def theirs(name):
    return find_dump_file(os.path.join(FIXTURES, "pytorch", name))


def _compare(npu, bench):
    records = compare_tables(load_dump(npu), load_dump(bench), CompareOptions(progress=False))
    return records, find_suspect(records)


def _schema(name):
    """(signature names, parameters passed by position, ((keyword, default), ...)) of a torch.nn.functional
    function whose one handle_torch_function call passes plain names and keywords with literal defaults."""
    function = getattr(F, name, None)
    if not inspect.isfunction(function):
        return None
    try:
        parameters = inspect.signature(function).parameters
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (TypeError, ValueError, OSError):
        return None
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "handle_torch_function"]
    if len(calls) != 1 or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters.values()):
        return None
    positional = [arg.id for arg in calls[0].args[2:] if isinstance(arg, ast.Name)]
    keywords = [keyword.arg for keyword in calls[0].keywords]
    if len(positional) != len(calls[0].args) - 2 or None in keywords or list(parameters)[:len(positional)] != positional \
            or not set(keywords) <= set(parameters):
        return None
    defaults = [parameters[k].default for k in keywords]
    if not all(isinstance(d, (type(None), bool, int, float, str)) and d is not inspect.Parameter.empty for d in defaults):
        return None
    return tuple(parameters), len(positional), tuple(zip(keywords, defaults))


def test_schema_table_is_how_torch_hands_functional_calls_to_hooks():
    """arg_schemas.py is what torch's own source says: the table rebuilt from the installed torch."""
    rebuilt = {name: s for name in dir(F) if not name.startswith("_") for s in [_schema(name)] if s}
    assert rebuilt == FUNCTIONAL_SCHEMAS
    assert {"layer_norm", "cross_entropy", "dropout", "softmax", "embedding"} <= set(FUNCTIONAL_SCHEMAS)


def test_our_dump_is_already_the_normalised_record(ours):
    """msprobe records a functional call as the schema says (leading parameters by position, the rest by name,
    defaults included), so normalisation leaves its dump as it is."""
    import json

    with open(ours["stats_l1_clean"]) as handle:
        data = json.load(handle)["data"]
    checked = 0
    for entry, body in data.items():
        parts = entry.split(".")
        if parts[0] == "Functional" and parts[-1] == "forward" and parts[1] in FUNCTIONAL_SCHEMAS:
            _, leading, keywords = FUNCTIONAL_SCHEMAS[parts[1]]
            assert len(body["input_args"]) == leading, entry
            assert list(body["input_kwargs"]) == [name for name, _ in keywords], entry
            checked += 1
    assert checked >= 10
    normalised, tool, not_comparable = normalise_dump(data, ours["stats_l1_clean"])
    assert normalised is data and tool == TOOL_MSPROBE and not_comparable == {}


def test_26x_layout_is_normalised_at_load(ours):
    table = load_dump(os.path.join(FIXTURES, "pytorch", "stats_l1_clean"))  # a dump folder is accepted
    assert table.header["tool"] == TOOL_REFERENCE and "/proc" in table.path
    names = set(table.columns["name"])
    # layer_norm's weight, bias and eps were positions 2-4 in the file
    assert {"Functional.layer_norm.0.forward.input.weight", "Functional.layer_norm.0.forward.input.eps"} <= names
    assert "Functional.layer_norm.0.forward.input.2" not in names
    # backward outputs by input position: [input, normalized_shape (null), weight, bias]
    rows = {n: i for i, n in enumerate(table.columns["name"])}
    shapes = [table.columns["shape_key"][rows[f"Functional.layer_norm.0.backward.output.{k}"]] for k in range(4)]
    assert shapes == [(2, 8, 32), None, (32,), (32,)]
    # every row of an entry both tools dumped pairs with a row of ours
    our_table = load_dump(ours["stats_l1_clean"])
    our_names, our_entries = set(our_table.columns["name"]), set(our_table.entries)
    shared = [n for n, e in zip(table.columns["name"], table.columns["entry"]) if e in our_entries]
    assert len(shared) > 0.98 * len(table) and set(shared) <= our_names


def test_26x_parameters_grad_index_is_dropped(ours):
    table = load_dump(theirs("stats_mix_clean"))
    grads = [n for n in table.columns["name"] if ".parameters_grad" in n]
    assert "Module.transformer.h.0.ln_1.LayerNorm.parameters_grad.weight" in grads
    assert not any(".parameters_grad.0" in entry for entry in table.entries)
    records, suspect = _compare(theirs("stats_mix_clean"), ours["stats_mix_clean"])
    paired = [records.names[r] for r in np.flatnonzero((records.npu_pos >= 0) & (records.bench_pos >= 0))]
    assert set(grads) <= set(paired)
    assert suspect is None and not records.judgement.suspicious.any()


@pytest.mark.parametrize("npu_side", ["theirs", "ours"])
@pytest.mark.parametrize("kind", ["stats_l1", "tensor_l1"])
def test_mixed_pair_names_the_fault_as_a_same_tool_pair(ours, npu_side, kind):
    same, same_suspect = _compare(ours[f"{kind}_gelu_tanh"], ours[f"{kind}_clean"])
    assert same_suspect is not None and same_suspect.entry == "Functional.gelu.1.forward"
    if npu_side == "theirs":
        clean = _compare(theirs(f"{kind}_clean"), ours[f"{kind}_clean"])
        mixed, suspect = _compare(theirs(f"{kind}_gelu_tanh"), ours[f"{kind}_clean"])
    else:
        clean = _compare(ours[f"{kind}_clean"], theirs(f"{kind}_clean"))
        mixed, suspect = _compare(ours[f"{kind}_gelu_tanh"], theirs(f"{kind}_clean"))
    assert clean[1] is None and not clean[0].judgement.suspicious.any()
    assert suspect is not None and (suspect.entry, suspect.kind) == (same_suspect.entry, same_suspect.kind)
    if kind == "tensor_l1":  # the tensor files were read and compared
        assert np.isfinite(mixed.metrics["cosine"]).sum() >= 40


def test_bf16_mixed_pair_has_no_suspect(ours):
    records, suspect = _compare(theirs("stats_l1_bf16"), ours["stats_l1_bf16"])
    assert suspect is None and not records.judgement.suspicious.any()


def test_cross_entropy_backward_is_not_comparable_across_tools(ours):
    """26.2.0 records the gradient with respect to the log-probabilities: -1/valid targets at each target,
    0 elsewhere (labels shift by one: 2 x 7 valid targets); msprobe the gradient with respect to the logits."""
    records, _ = _compare(theirs("stats_l1_clean"), ours["stats_l1_clean"])
    row = records.names.index("Functional.cross_entropy.0.backward.output.0")
    theirs_max, theirs_min = records.npu_stats[row, 0], records.npu_stats[row, 1]
    assert theirs_max == 0.0 and theirs_min == pytest.approx(-1 / 14, rel=1e-6)
    assert records.bench_stats[row, 0] > 0  # softmax - one_hot has positive entries
    assert records.reason[row] == Reason.CROSS_TOOL and not records.judgement.suspicious[row]
    text = render_result(records)
    cells = dict(zip(text.columns["NPU Name"], text.columns["Err_message"]))
    assert cells["Functional.cross_entropy.0.backward.output.0"].startswith("Not comparable across tools")
    # the same rows of a same-tool pair are compared as usual
    same, _ = _compare(ours["stats_l1_clean"], ours["stats_l1_clean"])
    assert same.reason[same.names.index("Functional.cross_entropy.0.backward.output.0")] == Reason.OK


def test_foreign_statistics_are_judged_within_their_summation_rounding():
    """A Norm 2 epsilons off is rounding between two tools' sums of 3,072 floats, not between one tool's;
    50 epsilons is a fault either way; an integer tensor's Norm is a float sum on each side."""
    eps32, n = 2.0 ** -23, 32 * 96
    bench = np.array([[1.0, -1.0, 0.001, 10.0], [1.0, -1.0, 0.001, 10.0], [5.0, 0.0, 2.0, 12.2474]])
    npu = bench.copy()
    npu[0, 3] += 2 * eps32 * 10.0
    npu[1, 3] += 50 * eps32 * 10.0
    npu[2, 3] += 1e-6
    eps = np.array([eps32, eps32, 0.0])
    numel = np.array([n, n, 6])
    same = judge_rows(npu, bench, numel, eps, eps)
    mixed = judge_rows(npu, bench, numel, eps, eps, cross_tool=True)
    assert same.suspicious.tolist() == [True, True, True]
    assert mixed.suspicious.tolist() == [False, True, False]


def test_a_folder_with_several_dumps_is_refused_by_name(tmp_path):
    for rank in (0, 1):
        folder = tmp_path / "step0" / f"rank{rank}"
        folder.mkdir(parents=True)
        (folder / "dump.json").write_text('{"task": "statistics", "data": {}}')
    with pytest.raises(CompareError, match="holds 2 dumps"):
        find_dump_file(str(tmp_path))
    assert find_dump_file(str(tmp_path / "step0" / "rank1")).endswith(os.path.join("rank1", "dump.json"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(CompareError, match="holds no dump.json"):
        find_dump_file(str(tmp_path / "empty"))


def test_two_reference_dumps_compare_as_their_files_have_them():
    """Both sides laid out by 26.2.0: its own layout, its own names (positional layer_norm weight), and the fault
    found all the same."""
    records, suspect = _compare(theirs("stats_l1_gelu_tanh"), theirs("stats_l1_clean"))
    assert "Functional.layer_norm.0.forward.input.2" in records.names
    assert not (records.reason == Reason.CROSS_TOOL).any()
    assert suspect is not None and suspect.entry == "Functional.gelu.1.forward"
