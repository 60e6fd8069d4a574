"""grad_probe for MindSpore (PyNative): gradient summaries taken from the gradients handed to the optimizer.

    probe = GradProbe("config.json").monitor(optimizer)    # task "grad_probe"
    ... train: optimizer(grads) ...
    probe.stop()

Step N is the N-th call (from 0) of this optimizer instance (a forward-pre-hook on the optimizer Cell).
Names are the parameters' `Parameter.name`. The CSV / npy layout is PyTorch's (msprobe.core.monitor.grad_summary).
Graph mode is refused: hooks on Cells do not run inside a compiled graph.
"""
import hashlib

from mindspore import dtype as mstype
from mindspore import nn, ops

from msprobe.core.errors import ConfigError, UnsupportedError
from msprobe.core.monitor.grad_summary import GradProbeBase, GradProbeSettings, ParamGradStats, host_grad_stats
from msprobe.core.framework import current_rank
from msprobe.mindspore.framework import FRAMEWORK
from msprobe.mindspore.monitor.tensor_stats import is_pynative, on_cpu

__all__ = ["GradProbe", "gradient_stats"]


def gradient_stats(named_grads: list, settings: GradProbeSettings) -> list:
    """ParamGradStats of each (name, grad): on the CPU, float32/float64 gradients in one C pass each on a host
    copy; the others with MindSpore reductions and one device-to-host transfer for the scalars."""
    if not named_grads:
        return []
    level = settings.level
    on_host = on_cpu()
    out = [host_grad_stats(name, grad.asnumpy(), level, settings.bounds)
           if on_host and grad.dtype in (mstype.float32, mstype.float64) else None for name, grad in named_grads]
    rest = [i for i, stats in enumerate(out) if stats is None]
    rows = []
    for i in rest:
        grad = named_grads[i][1]
        cells = [grad.max().astype(mstype.float32), grad.min().astype(mstype.float32),
                 ops.norm(grad).astype(mstype.float32)]
        if level == "L2":
            cells += [(grad <= bound).astype(mstype.float32).sum() for bound in settings.bounds]
            cells.append((grad == 0).astype(mstype.float32).sum())
        rows.append(ops.stack([c.reshape(()) for c in cells]))
    table = ops.stack(rows).asnumpy().astype(float).tolist() if rows else []
    for i, row in zip(rest, table):
        name, grad = named_grads[i]
        stats = out[i] = ParamGradStats(name=name, max=row[0], min=row[1], norm=row[2], shape=list(grad.shape))
        if level != "L0":
            stats.direction = (grad > 0).asnumpy()
        if level == "L2":
            stats.set_counts(row[3:-1], row[-1], int(grad.size))
    if level == "L0":
        for (_, grad), stats in zip(named_grads, out):
            stats.md5 = hashlib.md5(grad.astype(mstype.float32).asnumpy().tobytes()).hexdigest()  # noqa: S324
    return out


class GradProbe(GradProbeBase):
    def __init__(self, config):
        super().__init__(config)
        self._names = []

    def param_names(self):
        return [n for n in self._names if self.settings.wants_param(n)]

    def monitor(self, optimizer) -> "GradProbe":
        if not isinstance(optimizer, nn.Cell) or not hasattr(optimizer, "parameters"):
            raise ConfigError(f"grad_probe monitor() takes a MindSpore optimizer, got {type(optimizer).__name__}.")
        if not is_pynative():
            raise UnsupportedError("grad_probe for MindSpore needs PyNative mode: hooks on the optimizer do not run "
                                   "inside a compiled graph (set_context(mode=PYNATIVE_MODE)).")
        if self.session is not None:
            raise ConfigError("GradProbe.monitor() was already called; call stop() first.")
        self._names = [p.name for p in optimizer.parameters]
        self._open(current_rank(FRAMEWORK, default=0), lambda session: session.add_handle(
            optimizer.register_forward_pre_hook(self._before_step)))
        return self

    def _before_step(self, _cell, inputs):
        step = self.step
        self.step += 1
        if not self.settings.wants_step(step) or not inputs:
            return None
        grads = inputs[0]
        named = [(name, g) for name, g in zip(self._names, grads) if self.settings.wants_param(name)]
        self.writer.submit(step, gradient_stats(named, self.settings))
        return None

    def stop(self):
        if self.session is not None:
            self.session.close()
            self.session = None
        self._finish()
