"""Communication monitoring (`cc_distribution`), the framework-neutral half: wrapping collectives and naming their calls.

Each call of a collective in a collected step gives a record `{api}.{k}` (k: the api's call index in the
step) in `other_*.csv` with the statistics of its result, plus `{api}.{k}.pre` with the input's when
`cc_pre_hook` is on. In-place collectives (torch.distributed, mindspore.mint.distributed) are read from
their first tensor argument; functional ones (mindspore.communication.comm_func) from the first tensor they
return. `cc_codeline` keeps only calls made from the given lines (`train.py[23]`); `cc_log_only` logs each
api once (caller, dtypes, group size) so that the codeline list can be written from the log, and
`end_step` ends the run, hooks removed, at the first optimizer step. Asynchronous calls (`async_op=True`)
are recorded before they run only. The wrappers go through a HookSession, so removal restores the
original functions.

A framework adapter supplies how to find tensors in arguments, how to queue a statistic and how big a
process group is.
"""
import re
import traceback
from typing import Any, Callable, Dict, Iterable, Set

from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger

__all__ = ["CollectiveRecorder", "parse_codelines"]

_CODELINE = re.compile(r"^(.*)\[(\d+)\]$")


def parse_codelines(texts) -> list:
    """[(file suffix, line)] from `["train.py[23]"]`; the doc's escaped form `train.py\\[23\\]` is accepted."""
    out = []
    for text in texts or []:
        match = _CODELINE.match(text.replace("\\[", "[").replace("\\]", "]"))
        if match:
            out.append((match.group(1), int(match.group(2))))
        else:
            logger.warning(f"monitor config: cc_codeline entry {text!r} is not 'file.py[line]' and is ignored.")
    return out


class CollectiveRecorder:
    """Wraps collectives of one or more modules; records go through `add_stat(tensor, record_name)`."""

    def __init__(self, settings: dict, is_collecting: Callable[[], bool], add_stat: Callable,
                 tensors_of: Callable[[object], list], world_size: Callable[[object], int]):
        self.pre = settings.get("cc_pre_hook", False)
        self.log_only = settings.get("cc_log_only", False)
        self.codelines = parse_codelines(settings.get("cc_codeline", []))
        self.is_collecting = is_collecting
        self.add_stat = add_stat
        self.tensors_of = tensors_of
        self.world_size = world_size
        self.logged: Set[str] = set()
        self.calls: Dict[str, Any] = {}

    def install(self, session, module, names: Iterable[str], functional: bool = False) -> list:
        """Wrap each `module.name` that exists; returns the wrapped names."""
        wrapped = []
        for api in names:
            original = getattr(module, api, None)
            if callable(original):
                session.patch(module, api, self._wrap(api, original, functional))
                wrapped.append(api)
        return wrapped

    def new_step(self) -> None:
        self.calls.clear()

    def end_step(self, cleanup: Callable[[], None]) -> None:
        """After an optimizer step: call indices start again; with cc_log_only, `cleanup` (which must restore
        the collectives) runs and the run stops."""
        self.new_step()
        if self.log_only:
            cleanup()
            raise MsprobeError("monitor: cc_log_only is set; collectives were logged, training stops here.")

    def _caller_allowed(self, stack) -> bool:
        if not self.codelines:
            return True
        return any(frame.filename.endswith(path) and frame.lineno == line
                   for frame in stack for path, line in self.codelines)

    def _log(self, api, stack, args, kwargs) -> None:
        if api in self.logged:
            return
        self.logged.add(api)
        tensors = self.tensors_of(args[:2])
        caller = f"{stack[-1].filename}[{stack[-1].lineno}]" if stack else "?"
        try:
            size: Any = self.world_size(kwargs.get("group"))
        except Exception as exc:  # noqa: BLE001 - the log line must not break the collective
            size = f"unknown ({exc})"
        logger.info(f"monitor cc: {api} from {caller}, dtypes {[str(t.dtype) for t in tensors]}, group size {size}")

    def _wrap(self, api, original, functional):
        def wrapped(*args, **kwargs):
            if not (self.is_collecting() or self.log_only):
                return original(*args, **kwargs)
            stack = traceback.extract_stack(limit=12)[:-1]
            if self.log_only:
                self._log(api, stack, args, kwargs)
                return original(*args, **kwargs)
            if not self._caller_allowed(stack):
                return original(*args, **kwargs)
            index = self.calls.get(api, 0)
            self.calls[api] = index + 1
            inputs = self.tensors_of(args[:1] or list(kwargs.values())[:1])
            if self.pre and inputs:
                self.add_stat(inputs[0], f"{api}.{index}.pre")
            result = original(*args, **kwargs)
            if not kwargs.get("async_op", False):
                outputs = self.tensors_of(result) if functional else inputs
                if outputs:
                    self.add_stat(outputs[0], f"{api}.{index}")
            return result

        wrapped.__wrapped__ = original
        wrapped.__name__ = getattr(original, "__name__", api)
        return wrapped
