"""TrainerMon for MindSpore (PyNative): statistics of gradients, optimizer states, parameters, updates and
cell activations per optimizer step, with the alerts, csv/TensorBoard outputs and plots of the PyTorch one.

    from msprobe.mindspore.monitor import TrainerMon
    monitor = TrainerMon("monitor_config.json")
    monitor.set_monitor(net, grad_acc_steps=1, optimizer=optimizer)
    ... train: grads = grad_fn(...); optimizer(grads) ...
    monitor.remove()

`grad_reduced` is the gradient tuple handed to the optimizer (after any reduction and clipping done before
it); MindSpore has no per-parameter accumulation hook, so there is no `grad_unreduced`. Optimizer states are
the optimizer's ParameterTuples shaped like the parameters: Adam's `moment1` / `moment2` are written as
`exp_avg` / `exp_avg_sq` (bias-corrected with `beta1_power` / `beta2_power` for the alerts), others under
their attribute name (`moments`, `accum`, ...). Activations: forward inputs/outputs of cells and their
gradients (module_hooks.py); collectives: collectives.py; print_struct writes module_struct.json after the
first step and stops, as the PyTorch monitor does.
"""
from typing import Optional

import numpy as np
from mindspore import ParameterTuple, nn, ops

from msprobe.core.dump.session import HookSession
from msprobe.core.errors import ConfigError, UnsupportedError
from msprobe.core.monitor.engine import MonitorEngine
from msprobe.core.monitor.trainer_base import TrainerMonBase
from msprobe.core.monitor.module_struct import write_struct_and_stop
from msprobe.core.monitor.monitor_config import load_monitor_config
from msprobe.core.monitor.names import select_targets, squash_name
from msprobe.mindspore.monitor.collectives import install_collectives
from msprobe.mindspore.monitor.module_hooks import CellHooks
from msprobe.core.framework import current_rank
from msprobe.mindspore.framework import FRAMEWORK
from msprobe.mindspore.monitor.tensor_stats import StatBatch, is_pynative

__all__ = ["TrainerMon"]

_STATE_NAMES = {"moment1": "exp_avg", "moment2": "exp_avg_sq", "moments1": "exp_avg", "moments2": "exp_avg_sq"}
_POWERS = {"exp_avg": "beta1_power", "exp_avg_sq": "beta2_power"}


class TrainerMon(TrainerMonBase):
    HOOK_SESSIONS = ("cell_session", "session")

    def __init__(self, config_file_path: str, process_group=None, params_have_main_grad: bool = False,
                 opt_ty: Optional[str] = None):
        self.config = load_monitor_config(config_file_path)
        self.rank = current_rank(FRAMEWORK, default=0)
        self.engine = MonitorEngine(self.config, self.rank)
        self.batch = StatBatch(self.config.ops, self.config.eps)
        self.collecting_now = False
        self.session: Optional[HookSession] = None
        self.named_params = []
        self._positions = []
        self._old_params = None
        self._cells = []
        self.cell_hooks: Optional[CellHooks] = None
        self.cell_session: Optional[HookSession] = None
        self.collectives = None

    def set_monitor(self, model, grad_acc_steps: int = 1, optimizer=None, tp_group=None, dp_group=None,
                    start_iteration: int = 0) -> "TrainerMon":
        if not is_pynative():
            raise UnsupportedError("the MindSpore monitor needs PyNative mode (set_context(mode=PYNATIVE_MODE)).")
        if not isinstance(model, nn.Cell):
            raise ConfigError("set_monitor(model): model must be a mindspore.nn.Cell.")
        if not isinstance(optimizer, nn.Cell) or not hasattr(optimizer, "parameters"):
            raise ConfigError("set_monitor(..., optimizer=...): a MindSpore optimizer is required; its calls mark the steps.")
        if self.session is not None:
            raise ConfigError("TrainerMon is already monitoring a model; call remove() first.")
        cfg = self.config
        self.engine.step = start_iteration
        targets = cfg.targets or {"": {}}
        shown = {p.name: (squash_name(p.name) if cfg.squash_name else p.name) for p in optimizer.parameters}
        selected = set(select_targets(list(shown), targets)) | {n for n, s in shown.items()
                                                                  if s in select_targets(list(shown.values()), targets)}
        self._positions = [i for i, p in enumerate(optimizer.parameters) if p.name in selected]
        self.named_params = [(shown[optimizer.parameters[i].name], optimizer.parameters[i]) for i in self._positions]
        self._cells = []
        if (cfg.xy_distribution or cfg.print_struct) and (not cfg.module_ranks or self.rank in cfg.module_ranks):
            explicit = cfg.targets if cfg.targets and not cfg.all_xy else {"": {}}
            cells = list(model.cells_and_names())
            chosen = select_targets([name for name, _ in cells], explicit)
            for name, cell in cells:
                if name in chosen:
                    spec = cfg.targets.get(name, chosen[name]) if cfg.targets else chosen[name]
                    label = (squash_name(name) if cfg.squash_name else name) or "root"
                    self._cells.append((label, cell, spec))
        session = HookSession()
        with session.installing():
            session.add_handle(optimizer.register_forward_pre_hook(self._before_step))
            session.add_handle(optimizer.register_forward_hook(self._after_step))
            if cfg.cc_distribution["enable"]:
                self.collectives = install_collectives(self, session, cfg.cc_distribution)
        self.session = session
        self._install_cell_hooks()
        self._start_collecting(len(self.named_params), f"{len(self._cells)} cells")
        return self

    monitor_gnorm_with_ad = set_monitor

    def _install_cell_hooks(self) -> None:
        cfg = self.config
        if not self._cells:
            return
        forward, backward = not cfg.backward_only, not cfg.forward_only
        if cfg.forward_only and cfg.backward_only:
            forward = backward = False
        session = HookSession()
        with session.installing():
            self.cell_hooks = CellHooks(self, session, self._cells, forward=forward and cfg.xy_distribution,
                                        backward=backward and cfg.xy_distribution)
        self.cell_session = session

    def _before_step(self, optimizer, inputs):
        if not self.collecting_now:
            return None
        cfg = self.config
        if cfg.wg_distribution and inputs:
            grads = inputs[0]
            for (name, _), i in zip(self.named_params, self._positions):
                self.batch.add(grads[i], "grad_reduced", name)
        if cfg.param_distribution:
            for name, param in self.named_params:
                self.batch.add(param, "param", name)
        if cfg.mv_distribution:
            self._add_states(optimizer)
        if cfg.ur_distribution:
            self._old_params = [param.value().copy() for _, param in self.named_params]
        return None

    def _add_states(self, optimizer):
        count = len(optimizer.parameters)
        for attr in sorted(set(dir(optimizer))):
            if attr.startswith("_") or attr in ("parameters", "_parameters"):
                continue
            value = getattr(optimizer, attr, None)
            if not isinstance(value, ParameterTuple) or len(value) != count:
                continue
            if any(value[i].shape != optimizer.parameters[i].shape for i in self._positions):
                continue
            kind = _STATE_NAMES.get(attr, attr)
            scale = None
            power = getattr(optimizer, _POWERS.get(kind, ""), None)
            if power is not None:
                done = float(np.asarray(power.asnumpy()).reshape(-1)[0])
                if done >= 1.0:
                    continue  # no step taken yet: the moments are still their zero initial values
                scale = 1.0 / (1.0 - done)
            for (name, _), i in zip(self.named_params, self._positions):
                self.batch.add(value[i], kind, name, magnitude_scale=scale or 1.0, turbulence=scale is not None,
                               downward=kind != "exp_avg")

    def _after_step(self, optimizer, inputs, output):
        global_values = {}
        records = []
        if self.collecting_now:
            update_records, old_norms = [], []
            if self.config.ur_distribution and self._old_params is not None:
                for (name, param), old in zip(self.named_params, self._old_params):
                    update_records.append(self.batch.add(param.value() - old, "update", name, turbulence=False))
                    old_norms.append(ops.norm(old))
                self._old_params = None
            records = self.batch.records()
            grads = [r.values["norm"] for r in records if r.prefix == "grad_reduced"]
            if grads:
                global_values["grad_norm"] = sum(v * v for v in grads) ** 0.5
            if update_records:
                old = ops.stack(old_norms).asnumpy().astype(float).tolist()
                for record, norm in zip(update_records, old):
                    record.values["ratio"] = record.values["norm"] / norm if norm else float("nan")
                global_values["param_norm"] = sum(v * v for v in old) ** 0.5
                global_values["update_norm"] = sum(r.values["norm"] ** 2 for r in update_records) ** 0.5
                global_values["update_ratio"] = (global_values["update_norm"] / global_values["param_norm"]
                                                 if global_values["param_norm"] else float("nan"))
        if self.cell_hooks is not None and self.cell_hooks.struct is not None:
            write_struct_and_stop(self.cell_hooks.struct, self.remove)
        self.engine.finish_step(records, global_values)
        if self.cell_hooks is not None:
            self.cell_hooks.new_step()
        if self.collectives is not None:
            self.collectives.end_step(self.remove)
        self.collecting_now = self.engine.collecting()
        if self.engine.done and self.cell_session is not None:
            self.cell_session.close()  # nothing more to collect: cell hooks cost nothing from now on
            self.cell_session = None
        return None

    def generate_wgrad_metrics(self) -> tuple:
        return dict(self.engine.latest.get("grad_reduced", {})), {}

