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
their attribute name (`moments`, `accum`, ...). Activations: forward inputs/outputs of cells (no gradients).
"""
from typing import Optional

import numpy as np
from mindspore import ParameterTuple, nn, ops

from msprobe.core.dump.session import HookSession
from msprobe.core.errors import ConfigError, UnsupportedError
from msprobe.core.log import logger
from msprobe.core.monitor.engine import MonitorEngine
from msprobe.core.monitor.monitor_config import load_monitor_config, parse_target_spec
from msprobe.core.monitor.names import select_targets, squash_name
from msprobe.mindspore.monitor.tensor_stats import StatBatch, current_rank, is_pynative

__all__ = ["TrainerMon"]

_STATE_NAMES = {"moment1": "exp_avg", "moment2": "exp_avg_sq", "moments1": "exp_avg", "moments2": "exp_avg_sq"}
_POWERS = {"exp_avg": "beta1_power", "exp_avg_sq": "beta2_power"}


def _pick(value, index):
    from mindspore import Tensor

    if isinstance(value, Tensor):
        return value if index == 0 else None
    if isinstance(value, (tuple, list)) and len(value) > index and isinstance(value[index], Tensor):
        return value[index]
    return None


class TrainerMon:
    def __init__(self, config_file_path: str, process_group=None, params_have_main_grad: bool = False,
                 opt_ty: Optional[str] = None):
        self.config = load_monitor_config(config_file_path)
        self.rank = current_rank()
        self.engine = MonitorEngine(self.config, self.rank)
        self.batch = StatBatch(self.config.ops, self.config.eps)
        self.collecting_now = False
        self.session: Optional[HookSession] = None
        self.named_params = []
        self._positions = []
        self._old_params = None
        self._calls = {}

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
        session = HookSession()
        with session.installing():
            session.add_handle(optimizer.register_forward_pre_hook(self._before_step))
            session.add_handle(optimizer.register_forward_hook(self._after_step))
            hooked = 0
            if cfg.xy_distribution and not cfg.backward_only and (not cfg.module_ranks or self.rank in cfg.module_ranks):
                explicit = cfg.targets if cfg.targets and not cfg.all_xy else {"": {}}
                cells = list(model.cells_and_names())
                chosen = select_targets([name for name, _ in cells], explicit)
                for name, cell in cells:
                    if name in chosen:
                        spec = cfg.targets.get(name, chosen[name]) if cfg.targets else chosen[name]
                        label = (squash_name(name) if cfg.squash_name else name) or "root"
                        session.add_handle(cell.register_forward_hook(self._forward_hook(label, spec)))
                        hooked += 1
        self.session = session
        self.collecting_now = self.engine.collecting()
        logger.info(f"monitor: {len(self.named_params)} parameters, {hooked} cells hooked; output {self.engine.run_dir}")
        return self

    monitor_gnorm_with_ad = set_monitor

    def _forward_hook(self, label, spec):
        indices = {io: parse_target_spec(io, text) for io, text in spec.items()}

        def hook(cell, inputs, output):
            if not self.collecting_now:
                return None
            call = self._calls.get(label, 0)
            self._calls[label] = call + 1
            x, y = _pick(inputs, indices.get("input", 0)), _pick(output, indices.get("output", 0))
            for tensor, io in ((x, "input"), (y, "output")):
                if tensor is not None:
                    self.batch.add(tensor, "actv", f"{label}_{call}", io=io, micro_step=call)
            return None
        return hook

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
        self.engine.finish_step(records, global_values)
        self._calls.clear()
        self.collecting_now = self.engine.collecting()
        return None

    def generate_wgrad_metrics(self) -> tuple:
        return dict(self.engine.latest.get("grad_reduced", {})), {}

    def generate_xy_metrics(self) -> tuple:
        return dict(self.engine.latest.get("actv", {})), {}

    def remove(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
        self.collecting_now = False
        self.engine.close()

    @property
    def run_dir(self) -> str:
        return self.engine.run_dir
