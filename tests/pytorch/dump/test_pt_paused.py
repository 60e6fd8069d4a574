"""TorchDumpSession.paused(): our own work inside hooks runs with torch functions off, inside the reentrancy
guard, and both are restored after it, also when the work raises and when pauses nest."""
import pytest
import torch

from msprobe.core.dump.session import Reentrancy
from msprobe.pytorch.dump.dump_session import _Paused


def test_paused_turns_torch_functions_off_and_restores_them_when_the_work_raises():
    guard = Reentrancy()
    with pytest.raises(ValueError):
        with _Paused(guard):
            assert guard.active and not torch._C._is_torch_function_enabled()
            with _Paused(guard):  # nested: still paused after the inner one ends
                pass
            assert guard.active and not torch._C._is_torch_function_enabled()
            raise ValueError("inside a hook")
    assert not guard.active and torch._C._is_torch_function_enabled()


def test_paused_work_is_not_seen_by_a_torch_function_mode():
    seen = []

    class Recorder(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    guard = Reentrancy()
    with Recorder():
        with _Paused(guard):
            torch.ones(3).sum()
        assert not seen
        torch.ones(3).sum()
    assert seen
