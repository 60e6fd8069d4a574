"""TrainerMon for PyTorch: per-step statistics of activations, gradients, optimizer states, parameters and
collectives, with anomaly alerts and plots (config reference: docs/monitor.md).

    from msprobe.pytorch import TrainerMon
    monitor = TrainerMon("monitor_config.json", params_have_main_grad=False)
    monitor.set_monitor(model, grad_acc_steps=1, optimizer=optimizer)   # 1.2.1 name: monitor_gnorm_with_ad
    ... train ...
    monitor.remove()          # optional: every hook removed, files closed, plots drawn

Timing: `grad_unreduced` is the accumulated gradient when the last micro-batch's gradient arrives
(post-accumulate-grad hook), `grad_reduced` / `param` / optimizer states are read right before
`optimizer.step()` (values the step starts from); `update` is the parameter change made by the step.
Only the given optimizer instance is hooked (or, with optimizer=None, the first optimizer that updates
the model's parameters).
"""
from typing import Optional

import torch

from msprobe.core.dump.session import HookSession
from msprobe.core.errors import ConfigError
from msprobe.core.log import logger
from msprobe.core.monitor.engine import MonitorEngine
from msprobe.core.monitor.module_struct import write_struct_and_stop
from msprobe.core.monitor.monitor_config import OPS, load_monitor_config
from msprobe.core.monitor.trainer_base import TrainerMonBase
from msprobe.core.framework import current_rank
from msprobe.pytorch.framework import FRAMEWORK
from msprobe.pytorch.monitor.grad_probe import param_gradient
from msprobe.core.monitor.names import select_targets, squash_name
from msprobe.pytorch.monitor.module_hooks import ActivationHooks
from msprobe.pytorch.monitor.optimizer_state import OPT_TYPES, state_tensors
from msprobe.pytorch.monitor.optimizer_watch import watch_optimizer_steps
from msprobe.pytorch.monitor.tensor_stats import StatBatch

__all__ = ["TrainerMon"]


class TrainerMon(TrainerMonBase):
    HOOK_SESSIONS = ("module_session", "session")  # remove() closes them in this order
    _wrapped_optimizer = None

    def __init__(self, config_file_path: str, process_group=None, params_have_main_grad: bool = True,
                 opt_ty: Optional[str] = None):
        if opt_ty not in OPT_TYPES:
            raise ConfigError(f"opt_ty {opt_ty!r} is not known; use None (any torch optimizer) or one of "
                              f"{[t for t in OPT_TYPES if t]}.")
        self.config = load_monitor_config(config_file_path)
        self.process_group = process_group
        self.params_have_main_grad = params_have_main_grad
        self.opt_ty = opt_ty
        self.rank = current_rank(FRAMEWORK, default=0)
        self.engine = MonitorEngine(self.config, self.rank)
        self.batch = StatBatch(self.config.ops, self.config.eps)
        self.collecting_now = False
        self.session: Optional[HookSession] = None
        self.module_session: Optional[HookSession] = None
        self.activations: Optional[ActivationHooks] = None
        self.collectives = None
        self.named_params: list = []
        self.optimizer = None
        self.grad_acc_steps = 1
        self._unreduced_calls: dict = {}
        self._old_params: Optional[list] = None
        self._modules: list = []
        self._keep_grad = True
        self._step_records: list = []

    # -- 1.2.1 API ------------------------------------------------------------------------------
    @staticmethod
    def set_wrapped_optimizer(optimizer) -> None:
        """Megatron / DeepSpeed mixed-precision wrapper whose master copies hold the optimizer states."""
        TrainerMon._wrapped_optimizer = optimizer

    def monitor_gnorm_with_ad(self, model, grad_acc_steps: int = 1, optimizer=None, tp_group=None, dp_group=None,
                              start_iteration: int = 0) -> "TrainerMon":
        """Hook `model` (a module or a list of chunks) and `optimizer`; collection follows the config."""
        if self.session is not None:
            raise ConfigError("TrainerMon is already monitoring a model; call remove() first.")
        chunks = list(model) if isinstance(model, (list, tuple)) else [model]
        if not chunks or not all(isinstance(m, torch.nn.Module) for m in chunks):
            raise ConfigError("set_monitor(model): model must be a torch.nn.Module or a list of them.")
        if isinstance(grad_acc_steps, bool) or not isinstance(grad_acc_steps, int) or grad_acc_steps < 1:
            raise ConfigError(f"grad_acc_steps must be an integer >= 1, got {grad_acc_steps!r}.")
        cfg = self.config
        self.grad_acc_steps = grad_acc_steps
        self.optimizer = optimizer
        self.engine.step = start_iteration
        self._keep_grad = _first_in_group(dp_group)
        squash = cfg.squash_name if len(chunks) == 1 else False
        named = []
        for vpp, chunk in enumerate(chunks):
            for name, param in chunk.named_parameters():
                shown = squash_name(name) if squash else name
                named.append((vpp, name, shown, param))
        targets = cfg.targets or {"": {}}
        selected = set(select_targets([n for _, n, _, _ in named], targets)) | \
            set(select_targets([s for _, _, s, _ in named], targets))
        tp_first = _first_in_group(tp_group)
        self.named_params = [(vpp, shown, p) for vpp, name, shown, p in named
                             if (name in selected or shown in selected)
                             and (tp_first or getattr(p, "tensor_model_parallel", False))]
        if not self.named_params and (cfg.wg_distribution or cfg.mv_distribution or cfg.param_distribution):
            logger.warning(f"monitor: no parameter matches targets {list(targets)}.")
        hook_modules = not cfg.module_ranks or self.rank in cfg.module_ranks
        self._modules = []
        if hook_modules and (cfg.xy_distribution or cfg.print_struct):
            explicit = cfg.targets if cfg.targets and not cfg.all_xy else {"": {}}
            for vpp, chunk in enumerate(chunks):
                names = [name for name, _ in chunk.named_modules()]
                chosen = select_targets(names, explicit)
                for name, module in chunk.named_modules():
                    if name in chosen:
                        spec = cfg.targets.get(name, chosen[name]) if cfg.targets else chosen[name]
                        shown = (squash_name(name) if squash else name) or "root"
                        self._modules.append((vpp, shown, module, spec))
        session = HookSession()
        with session.installing():
            watch_optimizer_steps(session, pre=self._before_step, post=self._after_step, optimizer=optimizer,
                                  params=[p for _, _, p in self.named_params] or
                                  [p for chunk in chunks for p in chunk.parameters()])
            if cfg.cc_distribution["enable"]:
                from msprobe.pytorch.monitor.collectives import install_collectives
                self.collectives = install_collectives(self, session, cfg.cc_distribution)
        self.session = session
        self._install_module_hooks()
        self._start_collecting(len(self.named_params), f"{len(self._modules)} modules")
        return self

    set_monitor = monitor_gnorm_with_ad

    def _install_module_hooks(self) -> None:
        cfg = self.config
        session = HookSession()
        with session.installing():
            if self._modules and (cfg.xy_distribution or cfg.print_struct):
                forward = not cfg.backward_only
                backward = not cfg.forward_only
                if cfg.forward_only and cfg.backward_only:
                    forward = backward = False
                self.activations = ActivationHooks(self, session, self._modules,
                                                   forward=forward and cfg.xy_distribution,
                                                   backward=backward and cfg.xy_distribution)
            if cfg.wg_distribution:
                for vpp, name, param in self.named_params:
                    if param.requires_grad:
                        session.add_handle(param.register_post_accumulate_grad_hook(self._unreduced_hook(vpp, name)))
        self.module_session = session

    def _unreduced_hook(self, vpp, name):
        key = (vpp, name)

        def hook(param):
            if not self.collecting_now:
                return
            calls = self._unreduced_calls.get(key, 0) + 1
            self._unreduced_calls[key] = calls
            grad = param_gradient(param) if self.params_have_main_grad else param.grad
            if calls == self.grad_acc_steps and grad is not None and self._keep_grad:
                with torch.no_grad():
                    self.batch.add(grad, "grad_unreduced", name, vpp_stage=vpp, dedupe=False, keep=True)
        return hook

    # -- the step ----------------------------------------------------------------------------------
    def _grad_of(self, param):
        return param_gradient(param) if self.params_have_main_grad else param.grad

    def _before_step(self, optimizer) -> None:
        if not self.collecting_now:
            return
        cfg = self.config
        with torch.no_grad():
            if cfg.wg_distribution and self._keep_grad:
                for vpp in sorted({v for v, _, _ in self.named_params}):
                    pairs = [(n, self._grad_of(p)) for v, n, p in self.named_params if v == vpp]
                    pairs = [(n, g) for n, g in pairs if g is not None]
                    self.batch.add_many([g for _, g in pairs], "grad_reduced", [n for n, _ in pairs], vpp_stage=vpp)
            if cfg.param_distribution:
                for vpp, name, param in self.named_params:
                    self.batch.add(param, "param", name, vpp_stage=vpp, dedupe=False, keep=True)
            if cfg.mv_distribution:
                by_name = {name: vpp for vpp, name, _ in self.named_params}
                for key, name, tensor, scale in state_tensors(optimizer, [(n, p) for _, n, p in self.named_params],
                                                              TrainerMon._wrapped_optimizer):
                    self.batch.add(tensor, key, name, vpp_stage=by_name.get(name, 0), dedupe=False, keep=True,
                                   magnitude_scale=scale or 1.0, turbulence=scale is not None,
                                   downward=key != "exp_avg")
            if cfg.ur_distribution:
                self._old_params = [p.detach().clone() for _, _, p in self.named_params]
        # fetch now: the step is about to change parameters and states in place
        self._step_records = self.batch.records(end_of_step=False)

    def _after_step(self, optimizer) -> None:
        cfg = self.config
        global_values = {}
        if self.collecting_now:
            with torch.no_grad():
                if cfg.ur_distribution and self._old_params is not None:
                    new = [p.detach() for _, _, p in self.named_params]
                    updates = torch._foreach_sub(new, self._old_params)
                    old_norms = torch._foreach_norm(self._old_params)
                    # the update follows from gradient and optimizer state, both judged already
                    records = self.batch.add_many(updates, "update", [n for _, n, _ in self.named_params],
                                                  turbulence=False)
                    self._ratio_inputs = (records, torch.stack([n.float() for n in old_norms]))
                    self._old_params = None
            records = self._step_records + self.batch.records()
            self._step_records = []
            global_values = self._global_values(records)
            _mark_same_gradients(records)
        else:
            records = []
        if cfg.print_struct and self.activations is not None:
            write_struct_and_stop(self.activations.struct, self.remove)
        self.engine.finish_step(records, global_values)
        self._unreduced_calls.clear()
        if self.activations is not None:
            self.activations.new_step()
        if self.collectives is not None:
            self.collectives.end_step(self.remove)  # with cc_log_only: hooks removed, then the stop
        self.collecting_now = self.engine.collecting()
        if self.engine.done and self.module_session is not None:
            self.module_session.close()  # nothing more to collect: module and gradient hooks cost nothing now
            self.module_session = None

    def _global_values(self, records) -> dict:
        ratio_inputs = getattr(self, "_ratio_inputs", None)
        self._ratio_inputs = None
        grads = [r.values.get("norm", 0.0) for r in records if r.prefix == "grad_reduced"] or \
            [r.values.get("norm", 0.0) for r in records if r.prefix == "grad_unreduced"]
        out = {}
        if grads:
            out["grad_norm"] = sum(v * v for v in grads) ** 0.5
        if ratio_inputs is not None:
            update_records, old_norms = ratio_inputs
            old = old_norms.tolist()
            for record, norm in zip(update_records, old):
                record.values["ratio"] = record.values.get("norm", float("nan")) / norm if norm else float("nan")
            out["param_norm"] = sum(v * v for v in old) ** 0.5
            out["update_norm"] = sum(r.values.get("norm", 0.0) ** 2 for r in update_records) ** 0.5
            out["update_ratio"] = out["update_norm"] / out["param_norm"] if out["param_norm"] else float("nan")
        return out

    # -- on demand --------------------------------------------------------------------------------------
    @property
    def ops(self) -> list:
        return list(self.config.ops)

    @ops.setter
    def ops(self, value) -> None:
        kept = [op for op in value if op in OPS] or ["norm"]
        self.config.values["ops"] = kept
        self.batch = StatBatch(kept, self.config.eps)
        writer = self.engine.writer
        if writer is not None:
            writer.ops = list(kept)
            if hasattr(writer, "generation"):
                writer.generation += 1

    def reload_xy(self, xy_distribution: bool = False) -> None:
        """Switch activation monitoring on or off during training."""
        self.config.values["xy_distribution"] = bool(xy_distribution)
        if self.session is None:
            return
        if self.module_session is not None:
            self.module_session.close()
        if xy_distribution and not self._modules:
            logger.warning("monitor: reload_xy(True) has no module to hook (module_ranks or targets exclude them).")
        self.activations = None
        self._install_module_hooks()

    def generate_wgrad_metrics(self) -> tuple:
        """({tag: {op: value}} of the current gradients, {tag: ...} of the last collected unreduced gradients)."""
        batch = StatBatch(self.config.ops, self.config.eps)
        with torch.no_grad():
            for vpp, name, param in self.named_params:
                grad = self._grad_of(param)
                if grad is not None:
                    batch.add(grad, "grad_reduced", name, vpp_stage=vpp, dedupe=False)
        reduced = {r.tag(self.rank): {op: r.values[op] for op in self.config.ops} for r in batch.records()}
        return reduced, dict(self.engine.latest.get("grad_unreduced", {}))


def _first_in_group(group) -> bool:
    if group is None or not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return True
    ranks = torch.distributed.get_process_group_ranks(group)
    return not ranks or torch.distributed.get_rank() == min(ranks)


def _mark_same_gradients(records) -> None:
    """Without data parallelism the unreduced and reduced gradients are one tensor: judge it once."""
    unreduced = {(r.vpp_stage, r.name): r for r in records if r.prefix == "grad_unreduced"}
    for record in records:
        if record.prefix == "grad_reduced":
            twin = unreduced.get((record.vpp_stage, record.name))
            if twin is not None and twin.values == record.values:
                record.duplicate = True
