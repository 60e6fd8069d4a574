"""Communication monitoring (`cc_distribution`): statistics of the first tensor argument of torch.distributed collectives.

The collectives are wrapped through the HookSession (restored at removal). Each call of a collected step
gives a record `{api}.{k}` (k: the api's call index in the step) in `other_*.csv` with the output
statistics, plus `{api}.{k}.pre` with the input's when `cc_pre_hook` is on. `cc_codeline` keeps only calls
made from the given lines (`train.py[23]`); `cc_log_only` logs each api once (caller, dtypes, group size)
and ends the run at the first optimizer step, so that the codeline list can be written from the log.
Asynchronous calls (`async_op=True`) are recorded before they run only.
"""
import re
import traceback

import torch

from msprobe.core.log import logger

__all__ = ["CollectiveHooks", "COLLECTIVES"]

COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "broadcast", "reduce", "all_to_all_single", "gather", "scatter")
_CODELINE = re.compile(r"^(.*)\[(\d+)\]$")


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


class CollectiveHooks:
    def __init__(self, monitor, session, settings: dict):
        self.monitor = monitor
        self.pre = settings.get("cc_pre_hook", False)
        self.log_only = settings.get("cc_log_only", False)
        self.codelines = []
        for text in settings.get("cc_codeline", []) or []:
            match = _CODELINE.match(text.replace("\\[", "[").replace("\\]", "]"))
            if match:
                self.codelines.append((match.group(1), int(match.group(2))))
        self.logged = set()
        self.calls = {}
        dist = torch.distributed
        for api in COLLECTIVES:
            original = getattr(dist, api, None)
            if original is not None:
                session.patch(dist, api, self._wrap(api, original))

    def new_step(self):
        self.calls.clear()

    def _caller_allowed(self, stack):
        if not self.codelines:
            return True
        return any(frame.filename.endswith(path) and frame.lineno == line
                   for frame in stack for path, line in self.codelines)

    def _wrap(self, api, original):
        def wrapped(*args, **kwargs):
            monitor = self.monitor
            if not (monitor.collecting_now or self.log_only):
                return original(*args, **kwargs)
            stack = traceback.extract_stack(limit=12)[:-1]
            if self.log_only:
                if api not in self.logged:
                    self.logged.add(api)
                    tensors = _tensors(args[:2])
                    group = kwargs.get("group")
                    caller = f"{stack[-1].filename}[{stack[-1].lineno}]" if stack else "?"
                    logger.info(f"monitor cc: {api} from {caller}, dtypes {[str(t.dtype) for t in tensors]}, "
                                f"group size {torch.distributed.get_world_size(group)}")
                return original(*args, **kwargs)
            if not self._caller_allowed(stack):
                return original(*args, **kwargs)
            index = self.calls.get(api, 0)
            self.calls[api] = index + 1
            tensors = _tensors(args[:1] or list(kwargs.values())[:1])
            if self.pre and tensors:
                with torch.no_grad():
                    monitor.batch.add(tensors[0], "other", f"{api}.{index}.pre", dedupe=False)
            result = original(*args, **kwargs)
            if not kwargs.get("async_op", False) and tensors:
                with torch.no_grad():
                    monitor.batch.add(tensors[0], "other", f"{api}.{index}", dedupe=False)
            return result

        wrapped.__wrapped__ = original
        wrapped.__name__ = getattr(original, "__name__", api)
        return wrapped
