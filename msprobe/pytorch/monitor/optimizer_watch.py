"""Run callbacks right before / after the steps of one optimizer instance, never of every optimizer in the process.

`watch_optimizer_steps(session, pre, post, optimizer=...)` hooks that instance
(`register_step_pre_hook` / `register_step_post_hook`). Without an optimizer it installs torch's global
optimizer hooks but reacts only to the first optimizer that updates one of `params` and ignores every
other optimizer (an unrelated optimizer in the same process must not shift the step count).
"""
import weakref
from typing import Callable, Iterable, Optional

import torch

from msprobe.core.dump.session import HookSession

__all__ = ["watch_optimizer_steps", "unwrap_optimizer"]


def unwrap_optimizer(optimizer):
    """The torch optimizer inside Megatron / DeepSpeed wrappers (their `.optimizer`), else `optimizer` itself."""
    inner = optimizer
    for _ in range(4):
        if isinstance(inner, torch.optim.Optimizer):
            return inner
        nested = getattr(inner, "optimizer", None)
        if nested is None:
            break
        inner = nested
    return inner


def _owns_any(optimizer, param_ids: set) -> bool:
    return any(id(p) in param_ids for group in optimizer.param_groups for p in group["params"])


def watch_optimizer_steps(session: HookSession, pre: Optional[Callable] = None, post: Optional[Callable] = None,
                          optimizer=None, params: Iterable = ()) -> Callable[[], object]:
    """Install the hooks through `session`; returns a function giving the optimizer being watched (or None yet).

    `pre(optimizer)` runs before and `post(optimizer)` after each step of the watched optimizer.
    """
    if optimizer is not None:
        target = unwrap_optimizer(optimizer)
        if not isinstance(target, torch.optim.Optimizer):
            from msprobe.core.errors import ConfigError
            raise ConfigError(f"optimizer must be a torch.optim.Optimizer (or a wrapper with .optimizer), "
                              f"got {type(optimizer).__name__}.")
        if pre is not None:
            session.add_handle(target.register_step_pre_hook(lambda opt, args, kwargs: pre(opt)))
        if post is not None:
            session.add_handle(target.register_step_post_hook(lambda opt, args, kwargs: post(opt)))
        return lambda: target

    param_ids = {id(p) for p in params}
    bound = {"ref": None}
    rejected = weakref.WeakSet()

    def is_watched(opt) -> bool:
        ref = bound["ref"]
        if ref is not None:
            return ref() is opt
        if opt in rejected:
            return False
        if _owns_any(opt, param_ids):
            bound["ref"] = weakref.ref(opt)
            return True
        rejected.add(opt)
        return False

    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
    if pre is not None:
        session.add_handle(register_optimizer_step_pre_hook(
            lambda opt, args, kwargs: pre(opt) if is_watched(opt) else None))
    if post is not None:
        session.add_handle(register_optimizer_step_post_hook(
            lambda opt, args, kwargs: post(opt) if is_watched(opt) else None))
    return lambda: bound["ref"]() if bound["ref"] is not None else None
