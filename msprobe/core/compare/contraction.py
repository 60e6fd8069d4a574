"""Gradients (and products) whose difference is their operands' rounding amplified by cancellation.

A linear layer's backward computes three contractions from the incoming gradient G (tokens x out), the
forward's input X (tokens x in) and weight W (out x in); matmul, bmm and mm the first two:

    grad input    dX = G W        ||dX - dX'|| <= ||dG|| ||W|| + ||G|| ||dW_||
    grad weight   dW = G^T X      ||dW - dW'|| <= ||dG|| ||X|| + ||G|| ||dX_||
    grad bias     db = sum_t G_t  ||db - db'|| <= sqrt(tokens) ||dG||

(Cauchy-Schwarz; dA is an operand's difference between the sides). An element-wise mul, add or sub
whose operand was broadcast sums its gradient over the broadcast positions, a contraction too
(`_broadcast_bound`); addcmul (Adam's second moment) is an element-wise product (`_product_bound`,
Hoelder). Where the terms of a sum cancel (a bias feeding a LayerNorm has a gradient that is zero up
to rounding; a weight gradient summing tokens of opposite sign) the result is far smaller than the
bound's scale and its relative difference is large although every operand agrees: a difference of
the operands amplified by cancellation, not a cause. An operand carrying `s` epsilons of difference
relative to its own norm (its largest judged score, plus 1/2 for its own rounding) gives
||dA|| = (s + 1/2) eps ||A||; each bound adds the output's own rounding, 1/2 eps ||out||. Every check
of the output (Max, Min, Mean, Norm, tensor error) is bounded by the Frobenius norm of the output's
difference; the bound is expressed in each check's own units (eps times the check's scale). A row
holding the same tensor (the same four statistics on both sides: the parameter's gradient row, the
optimizer reading that gradient) gets the same bound; a parameter's gradient, summed by autograd over
the calls using the parameter (a tied embedding), is bounded by the sum of their differences; a
module's backward rows (sums of what its calls computed) are not judged as causes when the calls are
dumped. Selections (relu's sign, top-k ties) come from `selection`. The advisor (and the graph's
AMPLIFIED level) counts an output within the bound as amplified rounding and the calls reading it as
its consequences; the row's judgement (its colour) is unchanged: the difference is real, only not a
cause. The bound uses only the dump (Norms, shapes, the forward's rows), no per-model constant.
"""
from itertools import compress

import numpy as np

from msprobe.core.compare.memo import memoized
from msprobe.core.compare.selection import nan_max, selection_bounds, tie_rows

__all__ = ["explained_epsilons", "CONTRACTION_APIS", "BROADCAST_APIS", "PRODUCT_APIS"]

CONTRACTION_APIS = frozenset({"linear", "Dense", "matmul", "__matmul__", "__rmatmul__", "bmm", "mm"})
# (Dense: MindSpore mint.nn.Linear, Primitive.dense.Dense)
# element-wise calls whose gradient for a broadcast operand sums over the broadcast positions: the
# incoming gradient alone (add, sub) or times the other operand (mul)
PRODUCT_APIS = frozenset({"addcmul", "addcmul_"})
BROADCAST_APIS = {**{name: "sum" for name in ("add", "__add__", "__radd__", "sub", "__sub__", "__rsub__")},
                  **{name: "product" for name in ("mul", "__mul__", "__rmul__")}}
_BACKWARD = 1


def _rows_by_name(records):
    """{row name: row}, made once per structure in a job compare (records.structure_memo); not to be changed."""
    return memoized(records.extra.get("memo"), "rows by name",
                    lambda: {name: row for row, name in enumerate(records.names)})


def _operand(judgement, bench_stats, row, unseen=None):
    """(carried epsilons incl. own rounding, bench Norm) of an operand row, or None when unknown.
    unseen: {row: epsilons of ||d|| / ||A||} a selection may carry that its statistics do not show
    (selection.py), used where the tensor itself was not compared (statistics mode)."""
    if row is None:
        return None
    norm = bench_stats[row, 3]
    if not np.isfinite(norm):
        return None
    carried = nan_max(judgement.scores[row])
    carried = 0.0 if carried is None else carried
    if unseen and row in unseen and np.isnan(judgement.scores[row, 4]):
        carried = max(carried, unseen[row])
    return (carried if np.isfinite(carried) else np.inf) + 0.5, float(norm)


class _Operands:
    """Reads operands of the calls whose outputs get a bound: (carried epsilons, bench Norm, max |value|)."""

    def __init__(self, records, judgement, bench_stats, numel, unseen):
        self.records, self.judgement, self.stats, self.numel = records, judgement, bench_stats, numel
        self.unseen, self.columns = unseen, {}
        self._per_row = None

    def _rows(self):
        """_operand's and max_abs's inputs for every row at once, as Python floats: (bench Norm, largest
        non-NaN score or 0, tensor score NaN?, largest non-NaN |Max|, |Min| or inf)."""
        if self._per_row is None:
            scores, stats = self.judgement.scores, self.stats
            missing = np.isnan(scores)
            carried = np.where(missing.all(axis=1), 0.0, np.where(missing, -np.inf, scores).max(axis=1))
            extremes = np.abs(stats[:, :2])
            unknown = np.isnan(extremes)
            largest = np.where(unknown, -np.inf, extremes).max(axis=1)
            largest = np.where(unknown.all(axis=1) | ~np.isfinite(largest), np.inf, largest)
            self._per_row = (stats[:, 3].tolist(), carried.tolist(), missing[:, 4].tolist(), largest.tolist())
        return self._per_row

    def bench_column(self, key):
        """A bench column per row, read once (records.column builds the whole list)."""
        if key not in self.columns:
            self.columns[key] = memoized(self.records.extra.get("memo"), ("bench column", key),
                                         lambda: self.records.column("bench", key))
        return self.columns[key]

    def get(self, row):
        """_operand(judgement, stats, row, unseen), from the per-row lists."""
        if row is None:
            return None
        norms, carried_of, tensor_unjudged, _ = self._rows()
        norm = norms[row]
        if not norm - norm == 0.0:  # NaN or infinite
            return None
        carried = carried_of[row]
        if self.unseen and row in self.unseen and tensor_unjudged[row]:
            carried = max(carried, self.unseen[row])
        return (carried if carried - carried == 0.0 else np.inf) + 0.5, norm

    def max_abs(self, row):
        """The largest of |Max| and |Min| of a row (NaN left out), inf when none is finite."""
        return self._rows()[3][row]


def _bound_rows(records):
    """[(row, rule, operand rows...)] of the output rows _bounds has a rule for, their operands' rows found
    by name: the rows' structure alone decides (made once per structure in a job compare)."""
    entries, names = records.entries, records.names
    api_of = _bounded_apis(records)
    row_of = _rows_by_name(records).get
    found = []
    for row in [row for row, entry in enumerate(entries) if entry in api_of]:
        entry, name = entries[row], names[row]
        if ".output." not in name or not name.startswith(entry + ".output."):
            continue
        api, tail = api_of[entry], name[len(entry) + 1:]
        if api in PRODUCT_APIS and entry.endswith("forward"):
            if tail == "output.0":
                found.append((row, "product", [row_of(f"{entry}.input.{i}") for i in range(3)],
                              row_of(f"{entry}.input.value")))
        elif records.phases[row] != _BACKWARD or not entry.endswith("backward"):
            continue
        elif api in CONTRACTION_APIS and tail in ("output.0", "output.1", "output.2"):
            forward = entry[: -len("backward")] + "forward"
            other = None if tail == "output.2" else row_of(f"{forward}.input.{1 if tail == 'output.0' else 0}")
            found.append((row, "linear", tail == "output.2", row_of(f"{entry}.input.0"), other))
        elif api in BROADCAST_APIS:
            forward = entry[: -len("backward")] + "forward"
            index = int(tail[len("output."):]) if tail[len("output."):].isdigit() else -1
            if index in (0, 1):
                found.append((row, "broadcast", BROADCAST_APIS[api], row_of(f"{entry}.input.0"), row_of(name),
                              row_of(f"{forward}.input.{index}"), row_of(f"{forward}.input.{1 - index}")))
    return found


def _bounds(records, judgement, bench_stats, numel, unseen=None):
    """{output row: Frobenius bound of its difference, in units of eps} of contraction backward outputs
    and element-wise products (addcmul), each with the output's own rounding (1/2 eps ||out||)."""
    ops, bounds = _Operands(records, judgement, bench_stats, numel, unseen), {}
    for row, rule, *operands in memoized(records.extra.get("memo"), "bound rows", lambda: _bound_rows(records)):
        if rule == "product":
            bound = _product_bound(ops, *operands)
        elif rule == "linear":
            bound = _linear_bound(ops, *operands)
        else:
            bound = _broadcast_bound(ops, *operands)
        if bound is not None and np.isfinite(bench_stats[row, 3]):
            bounds[row] = bound + 0.5 * abs(bench_stats[row, 3])  # and the output's own rounding
    return bounds


_BOUNDED_APIS = PRODUCT_APIS | CONTRACTION_APIS | set(BROADCAST_APIS)


def _bounded_apis(records):
    """{entry: its API's last name} of the API calls (not modules) _bounds has a rule for."""
    by_entry = dict(zip(records.entries, records.parsed))
    return {entry: api for entry, api in ((entry, parsed.api.rsplit(".", 1)[-1]) for entry, parsed in by_entry.items()
                                          if isinstance(entry, str) and parsed is not None and not parsed.is_module)
            if api in _BOUNDED_APIS}


def _linear_bound(ops, bias, grad_row, other_row):
    """A contraction's gradient (output.0 / output.1: against the forward's other operand; the bias's,
    output.2: a sum over the tokens)."""
    grad = ops.get(grad_row)
    if grad is None:
        return None
    if bias:
        shape = ops.bench_column("shape_key")[grad_row]
        tokens = ops.numel[grad_row] / (shape[-1] if shape else 1)
        return grad[0] * np.sqrt(max(tokens, 1.0)) * grad[1]
    other = ops.get(other_row)
    return None if other is None else (grad[0] + other[0]) * grad[1] * other[1]


def _broadcast_bound(ops, kind, grad_row, out_row, operand_row, other_row):
    """The bound of an element-wise call's gradient for an operand that was broadcast (fewer elements
    than the incoming gradient G): backward sums G (add, sub) or G times the other operand X (mul) over
    the k = numel(G) / numel(operand) positions the operand was broadcast to, a contraction whose terms
    may cancel. Per output element |sum dG_t X_t| is at most ||dG_S|| ||X_S|| and at most
    max|X| sqrt(k) ||dG_S|| over its k terms S, so ||d out|| <= ||dG|| min(||X|| sqrt(n_G / n_X),
    sqrt(k) max|X|) + the same with G and X swapped; sum: sqrt(k) ||dG||. Operands not broadcast
    (k = 1) are not contractions and get no bound."""
    grad = ops.get(grad_row)
    if grad is None or out_row is None or operand_row is None:
        return None
    numel = ops.numel
    k = numel[grad_row] / max(numel[out_row], 1.0)
    if not k > 1.0 or numel[operand_row] != numel[out_row]:
        return None  # not broadcast, or not the gradient of the operand it is named after
    if kind == "sum":
        return grad[0] * np.sqrt(k) * grad[1]
    other = ops.get(other_row)
    if other is None:
        return None
    expand = np.sqrt(max(numel[grad_row] / max(numel[other_row], 1.0), 1.0))
    reach_x = min(other[1] * expand, np.sqrt(k) * ops.max_abs(other_row))
    reach_g = min(grad[1], np.sqrt(k) * ops.max_abs(grad_row))
    return grad[0] * grad[1] * reach_x + other[0] * other[1] * expand * reach_g


def _product_bound(ops, rows, value_row):
    """addcmul: out = a + v t1 t2 element-wise (Adam's second moment, v (1 - beta2) g g). Hoelder:
    ||d out|| <= ||da|| + |v| (max|t2| ||dt1|| + max|t1| ||dt2||): squaring a gradient whose largest
    elements carry s epsilons moves the square's Norm, which those elements dominate, by up to 2 s."""
    operands = [ops.get(r) for r in rows]
    if any(o is None for o in operands):
        return None
    value = ops.bench_column("value")[value_row] if value_row is not None else 1.0
    value = abs(float(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else 1.0
    (sa, na), (s1, n1), (s2, n2) = operands
    return sa * na + value * (ops.max_abs(rows[2]) * s1 * n1 + ops.max_abs(rows[1]) * s2 * n2)


def row_keys(*arrays):
    """Per row, the bytes of the row in each of the (rows, k) float arrays, concatenated: equal keys,
    equal rows bit for bit (made in one numpy call, not a tobytes() per row)."""
    joined = np.ascontiguousarray(np.concatenate(arrays, axis=1), dtype=np.float64)
    return joined.view(np.dtype((np.void, joined.shape[1] * 8))).ravel().tolist() if len(joined) else []


def _same_tensors(bounds, stats, nonzero=True, keys=None):
    """The bounds extended to every row holding the same tensor as a bounded output (the parameter's
    gradient row, the optimizer reading that gradient): the same Max, Min, Mean and Norm on both sides.
    Only tensors with a Norm (nonzero unless `nonzero` is False) are matched. keys: _tensor_keys(stats)."""
    keys = _tensor_keys(stats) if keys is None else keys
    norm = stats[1][:, 3]
    usable = np.isfinite(norm) & ((norm != 0) if nonzero else True)
    bound_of = {keys[row]: bound for row, bound in bounds.items() if usable[row]}
    out = dict(bounds)
    if bound_of:
        rows = np.flatnonzero(usable).tolist()  # the rows whose key is bounded picked in C, then looked at
        for row in compress(rows, map(bound_of.__contains__, map(keys.__getitem__, rows))):
            if row not in out:
                out[row] = bound_of[keys[row]]
    return out


def _tensor_keys(stats):
    """row_keys of the NPU and bench statistics, NaN and infinities as -1, -2, -3 (so that they match)."""
    return row_keys(*(np.nan_to_num(s, nan=-1.0, posinf=-2.0, neginf=-3.0) for s in stats))


def explained_epsilons(records, judgement, stats, numel):
    """(rows, 5) epsilons of each check that the operands of a contraction, an element-wise product or a
    selection (selection.py) explain (0 for every other row; inf for an index output that is a tie
    within rounding): the advisor counts an output within them as amplified rounding, not a cause.
    The judgement (the row's colour) is left as it is: the difference is real, only not a cause."""
    out = np.zeros(judgement.scores.shape)
    bench_stats, keys = stats[1], _tensor_keys(stats)
    chosen = _same_tensors(selection_bounds(records, judgement, bench_stats, numel, _rows_by_name(records)), stats,
                           keys=keys)
    # what a selection may carry unseen by the statistics, relative to each row's own Norm
    unseen = {row: bound / abs(bench_stats[row, 3]) for row, bound in chosen.items()
              if np.isfinite(bench_stats[row, 3]) and bench_stats[row, 3] != 0}
    bounds = _same_tensors({**_bounds(records, judgement, bench_stats, numel, unseen), **chosen}, stats, keys=keys)
    bounds.update(_parameter_gradients(records, judgement, stats, unseen, bounds))
    if bounds:
        rows = np.fromiter(bounds, dtype=np.int64)
        bound = np.fromiter(bounds.values(), dtype=np.float64)
        bench = bench_stats[rows]
        with np.errstate(invalid="ignore", divide="ignore"):
            rms = np.abs(bench[:, 3]) / np.sqrt(np.maximum(numel[rows], 1.0))
            scale = np.stack([np.fmax(np.abs(bench[:, 0]), rms), np.fmax(np.abs(bench[:, 1]), rms),
                              np.abs(bench[:, 3]), np.abs(bench[:, 3]), np.abs(bench[:, 3])], axis=1)
            explained = bound[:, None] / scale
        out[rows] = np.where(np.isfinite(explained), explained, 0.0)
    out[list(_same_tensors(dict.fromkeys(tie_rows(records, judgement), 0.0), stats, False, keys))] = np.inf
    out[memoized(records.extra.get("memo"), "module gradients", lambda: _module_gradients(records))] = np.inf
    return out


def _parameter_gradients(records, judgement, stats, unseen, bounds):
    """{parameter gradient row: bound}: a parameter's gradient is the sum autograd makes of what each
    call using the parameter computed for it (a tied embedding and output projection has three users),
    so ||d grad|| <= sum over users of ||d g_u||, each user's difference its own (carried epsilons, or
    the bound of its contraction). The users are the forward inputs holding the parameter's tensor (the
    same statistics as the module's `parameters.<name>` row); their gradient is that call's backward
    output of the same index."""
    inputs, parameters = memoized(records.extra.get("memo"), "parameter gradient rows",
                                  lambda: _parameter_gradient_rows(records))
    out, keys, row_key = {}, {}, row_keys(*stats)
    for row, grad in inputs:
        keys.setdefault(row_key[row], []).append(grad)
    for row, param in parameters:
        total = 0.0
        for grad in keys.get(row_key[param], []):
            operand = _operand(judgement, stats[1], grad, unseen)
            if operand is None:
                continue
            total += max(operand[0], bounds.get(grad, 0.0) / operand[1]) * operand[1]
        if total > 0:
            out[row] = max(total, bounds.get(row, 0.0))
    return out


def _parameter_gradient_rows(records):
    """([(forward input row, its gradient's row or None)], [(parameter gradient row, parameter row)]):
    what _parameter_gradients reads, found by name once per structure."""
    by_name, names, entries = _rows_by_name(records), records.names, records.entries
    inputs, parameters = [], []
    for row in np.flatnonzero(records.phases == 0).tolist():
        entry = entries[row]
        tail = names[row][len(entry) + 1:] if isinstance(entry, str) else ""
        if tail.startswith("input.") and tail[len("input."):].isdigit() and entry.endswith("forward"):
            inputs.append((row, by_name.get(f"{entry[: -len('forward')]}backward.output.{tail[len('input.'):]}")))
    for row in np.flatnonzero(records.phases == 2).tolist():
        entry, name = entries[row], names[row]
        if not isinstance(entry, str) or not entry.endswith(".parameters_grad"):
            continue
        param = by_name.get(f"{entry[: -len('.parameters_grad')]}.forward.0.parameters.{name[len(entry) + 1:]}")
        if param is not None:
            parameters.append((row, param))
    return inputs, parameters


def _module_gradients(records):
    """Output rows of Module backward entries, when the dump also records the API calls' backward (level
    mix): a module's input gradient is what the calls inside it computed, summed by autograd over the
    input's users inside the module (the residual path and the norm of a block): a sum whose terms may
    cancel. Those calls are judged one by one before the module's row (backward records a module after
    the calls inside it), so the module's difference is theirs, amplified by the sum, not its own."""
    entries, phases, names, parsed_rows = records.entries, records.phases, records.names, records.parsed
    modules, calls = [], False
    for row in np.flatnonzero(phases == _BACKWARD).tolist():
        parsed = parsed_rows[row] if isinstance(entries[row], str) else None
        if parsed is None:
            continue
        if not parsed.is_module:
            calls = True
        elif ".output." in names[row][len(entries[row]):]:
            modules.append(row)
    return modules if calls else []
