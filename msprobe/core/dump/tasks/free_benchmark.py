"""The free_benchmark task: run each selected API again on perturbed inputs and report where the outputs
disagree (check), or give the API's output the high-precision result (fix)."""
from typing import Any, Dict, Optional

from msprobe.core.config_fields import Field, boolean, choice, integer, string_list

from msprobe.core.dump.tasks import Task, register_task
from msprobe.core.framework import get_framework
from msprobe.core.free_benchmark import judge
from msprobe.core.free_benchmark.csv_writer import FreeBenchmarkRow, ResultCsv
from msprobe.core.free_benchmark.preheat import Preheat
from msprobe.core.free_benchmark.settings import FreeBenchmarkSettings
from msprobe.core.log import logger
from msprobe.core.naming import is_inplace, is_random_api

__all__ = ["FreeBenchmark"]

PERT_MODES = ("improve_precision", "add_noise", "no_change", "bit_noise", "change_value", "to_cpu")
# calls never re-run: collectives would wait for the other ranks' second run (deadlock)
_NEVER = ("Distributed.",)
# APIs whose output counts elements: a one-ulp nudge across a bin edge moves a whole count, which is
# not a fragile floating-point result (Mixtral's router histc was flagged with max_rel 1e5)
_COUNTING = frozenset({"histc", "histogram", "bincount"})


@register_task("free_benchmark")
class FreeBenchmark(Task):
    """task "free_benchmark" (level L1): no bench run needed. Each selected API call runs a second time
    on perturbed inputs; in check mode the two outputs are compared (ratio of magnitudes, per-dtype
    thresholds, sign flips) and disagreeing calls are appended to {dump_path}/free_benchmark.csv; in fix
    mode the high-precision (or CPU) result replaces the API's output. No dump.json is written
    (docs/free_benchmark.md).

    In check mode the user's computation is untouched (re-runs work on copies, without autograd), so
    training is bit-identical to a run without the tool. In-place APIs are re-run on a copy of their
    inputs taken before the first run. Random APIs (dropout...), counting APIs (histc, histogram, bincount)
    and collectives are never re-run.
    """

    levels = ("L1",)
    selects_calls = True      # scope is a set of names here, not a range: the collector's filter passes all
    describes_calls = False   # no dump.json: calls are only routed here
    config_fields = (
        Field("scope", string_list, [], "exact API names (`\"Torch.prod.0.forward\"`); not with `list`"),
        Field("list", string_list, [], "parts of API names (`\"prod\"`); MindSpore: full names "
              "(`\"mindspore.ops.bmm\"`)"),
        Field("fuzz_device", choice("npu", "cpu"), "npu", "`npu`: the device the model runs on; `cpu` with "
              "`to_cpu` only"),
        Field("pert_mode", choice(*PERT_MODES), "improve_precision", "how inputs are perturbed"),
        Field("handler_type", choice("check", "fix"), "check", "`check` reports, `fix` replaces the output "
              "(improve_precision or to_cpu, forward, no preheat)"),
        Field("fuzz_level", choice("L1"), "L1", "API level only"),
        Field("fuzz_stage", choice("forward", "backward"), "forward", "`backward`: check gradients w.r.t. the "
              "inputs"),
        Field("if_preheat", boolean, False, "learn per-API thresholds in the first `preheat_step` steps"),
        Field("preheat_step", integer(1), 15, "steps of preheat"),
        Field("max_sample", integer(1), 20, "preheat samples per API and step"),
        Field("bench_dtype", choice("float32", "float64"), "float32", "the dtype improve_precision / to_cpu raise "
              "to", listed=False),
    )

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        framework = context.adapter.framework
        self.settings = FreeBenchmarkSettings.from_section(context.config.section, framework)
        self.ops = get_framework(framework).perturbation_ops()
        self.csv = ResultCsv(context.config.dump_path)
        self.preheat = Preheat(self.settings.preheat_step, self.settings.max_sample) \
            if self.settings.if_preheat else None
        self.inputs: Dict[int, tuple] = {}   # id(call) -> (args, kwargs) until after_call
        self.handles: list = []               # backward-stage hooks of this step
        self.skipped: set = set()
        self.checked: Dict[str, None] = {}    # call names judged this step (in order)
        self.checked_apis: set = set()         # their API keys
        self.flagged = 0                       # rows written for this step
        self.fixed = 0                         # calls whose output got the high-precision result
        self.reported: Optional[tuple] = None  # the counts of the last summary line

    # -- the call ---------------------------------------------------------------------------
    def before_call(self, call, args, kwargs):
        if call.is_module or not self.settings.selects(call.name, call.key) or call.key.startswith(_NEVER):
            return
        if is_random_api(call.api):
            self._skip(call.key, "its output is random")
            return
        if call.api.rsplit(".", 1)[-1] in _COUNTING:
            self._skip(call.key, "its output counts elements")
            return
        kwargs = kwargs or {}
        settings = self.settings
        if not self.ops.has_work(args, kwargs, settings.pert_mode, settings.bench_dtype):
            return  # nothing to perturb (improve_precision of a float32 API): no copy, no re-run
        if is_inplace(call.api, kwargs) or (kwargs and "out" in kwargs):
            # the first run overwrites them: keep the inputs as they are now
            args, kwargs = self.ops.snapshot(args, kwargs)
        self.inputs[id(call)] = (args, kwargs)

    def after_call(self, call, output):
        inputs = self.inputs.pop(id(call), None)
        function = getattr(call, "function", None)
        if inputs is None:
            return output
        if function is None:
            self._skip(call.key, "the hook did not pass the function to run again")
            return output
        try:
            return self._handle(call, function, inputs, output)
        except Exception as exc:  # noqa: BLE001 - a failed re-run must not stop the user's call
            self._skip(call.key, f"its re-run failed ({type(exc).__name__}: {exc})")
            return output

    def _handle(self, call, function, inputs, output):
        settings, ops = self.settings, self.ops
        args, kwargs = inputs
        outputs = ops.float_outputs(output)
        if not outputs:
            return output
        step = self.context.current_step
        if settings.fix:
            output = ops.fixed_output(function, args, kwargs, output, settings.pert_mode, settings.bench_dtype)
            self.fixed += 1
            self._checked(call.name, call.key)
            return output
        if self.preheat is not None and self.preheat.active(step):
            self._preheat_sample(call, function, args, kwargs, output, outputs)
            return output
        perturbed = ops.perturb(args, kwargs, settings.pert_mode, settings.bench_dtype)
        if perturbed is None:
            return output
        if settings.fuzz_stage == "backward":
            self.handles.extend(ops.watch_backward(
                output, function, args, kwargs, perturbed,
                lambda originals, changed: self._judge_grads(call, step, originals, changed)))
            return output
        result = ops.run(function, *perturbed)
        for index, tensor in outputs:
            other = ops.element(result, index)
            if other is not None:
                self._judge(call.name, call.key, step, "forward", tensor, other, index)
        return output

    # -- judgement --------------------------------------------------------------------------
    def _limit(self, key, dtype_name):
        default = judge.threshold(dtype_name, self.settings.pert_mode)
        if self.preheat is None:
            return default
        return self.preheat.threshold(key, judge.dtype_key(dtype_name), default)

    def _judge(self, name, key, step, stage, original, perturbed, output_index: Optional[int]):
        dtype_name, shape = self.ops.describe(original)
        noise_eps = judge.noise_epsilon(dtype_name, self.settings.pert_mode)
        ratio, flipped = self.ops.compare(original, perturbed, judge.tolerance(dtype_name, stage), noise_eps)
        limit = self._limit(key, dtype_name)
        # preheat saw this API flip signs while accurate (limit inf): sign flips are not findings for it
        max_rel = judge.verdict(ratio, flipped and limit != float("inf"), limit)
        self._checked(name, key)
        if max_rel is not None:
            self.flagged += 1
            self.csv.add(FreeBenchmarkRow(self._rank(), self.settings.pert_mode, stage, step, name, max_rel,
                                          dtype_name, shape, output_index))

    def _judge_grads(self, call, step, originals, changed):
        present = [(i, a, b) for i, (a, b) in enumerate(zip(originals, changed)) if a is not None and b is not None]
        name = call.backward_name
        for i, a, b in present:
            self._judge(name, call.key, step, "backward", a, b, i if len(present) > 1 else None)

    def _preheat_sample(self, call, function, args, kwargs, output, outputs):
        preheat, settings, ops = self.preheat, self.settings, self.ops
        if not preheat.take_sample(call.key):
            return
        perturbed = ops.perturb(args, kwargs, settings.pert_mode, settings.bench_dtype)
        bench = ops.raise_precision(args, kwargs, "float32" if settings.bench_dtype == "float32" else "float64",
                                    to_cpu=True)
        if perturbed is None or bench is None:
            return
        result, reference = ops.run(function, *perturbed), ops.run(function, *bench)
        for index, tensor in outputs:
            other, best = ops.element(result, index), ops.element(reference, index)
            if other is None or best is None:
                continue
            dtype_name = ops.describe(tensor)[0]
            tol, default = judge.tolerance(dtype_name), judge.threshold(dtype_name)
            ratio, flipped = ops.compare(tensor, other, tol)
            error, error_flipped = ops.compare(tensor, best, tol)
            accurate = not error_flipped and error <= default
            preheat.record(call.key, judge.dtype_key(dtype_name), float("inf") if flipped else ratio, accurate)

    # -- bookkeeping ------------------------------------------------------------------------
    def _rank(self):
        rank = self.context.rank
        return rank if rank is not None else 0

    def _skip(self, key, reason):
        if key not in self.skipped:
            self.skipped.add(key)
            logger.info(f"msprobe free_benchmark: {key} is not perturbed: {reason}.")

    def _checked(self, name, key):
        self.checked[name] = None
        self.checked_apis.add(key)

    def summary(self):
        """The step's one-line account: what was checked, found and fixed, and where the CSV is."""
        settings = self.settings
        text = (f"msprobe free_benchmark step {self.context.current_step}: checked {len(self.checked)} call(s) of "
                f"{len(self.checked_apis)} API(s) ({settings.pert_mode}, {settings.fuzz_stage} stage, "
                f"{settings.handler_type} mode)")
        if settings.fix:
            return text + f"; fixed {self.fixed} call(s): their outputs now hold the {settings.pert_mode} result."
        found = f"{self.flagged} flagged" if self.flagged else "0 flagged (every perturbed re-run agreed)"
        return text + f"; {found}; results: {self.csv.path}"

    def step_end(self):
        for handle in self.handles:
            handle.remove()
        self.handles = []
        self.inputs.clear()
        self.csv.flush(header_only=not self.settings.fix)
        counts = (self.context.current_step, len(self.checked), self.flagged, self.fixed)
        # stop() and step() both end a step, and exit ends an empty one: one line per step with news, and
        # one line in any case for a run that checked nothing
        if counts != self.reported and (self.checked or self.reported is None):
            self.reported = counts
            logger.info(self.summary())

    def new_step(self):
        self.checked, self.checked_apis, self.flagged, self.fixed = {}, set(), 0, 0
        if self.preheat is not None:
            step = self.context.current_step
            if 2 <= step <= self.preheat.preheat_step:  # the previous step sampled: learn from it
                self.preheat.adapt(judge.threshold)
            self.preheat.new_step(step)
