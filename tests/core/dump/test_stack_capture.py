"""StackCapture: the C-walked cache key (native.stack_key) gives the same stacks as the Python walk."""
import sys

import pytest

from msprobe.core.dump import native, stack


def _site_a(capture):
    return capture.capture(1)


def _site_b(capture):
    return capture.capture(1)


def _nested(depth, capture, site):
    if depth:
        return _nested(depth - 1, capture, site)
    return site(capture)


def _stacks(capture):
    return [list(_nested(depth, capture, site)) for depth in (0, 3, 3, 9) for site in (_site_a, _site_b)]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="stack_key needs PyFrame_GetLasti (Python 3.11)")
def test_native_stack_key_names_each_frame_code_and_offset():
    assert native.stack_key is not None  # built in place for the tests (setup.py build_ext --inplace)
    frame = sys._getframe()
    depth = 0
    walk = frame
    while walk is not None:
        depth += 1
        walk = walk.f_back
    key = native.stack_key(frame)
    assert len(key) == depth * 16
    assert key != native.stack_key(sys._getframe(1))


def test_capture_with_c_key_equals_capture_with_python_walk(monkeypatch):
    results = []
    for walker in (stack._native_stack_key, None):  # one call line: the stacks may differ only by the walk
        monkeypatch.setattr(stack, "_native_stack_key", walker)
        results.append(_stacks(stack.StackCapture()))
    with_native, with_python = results
    assert with_native == with_python
    # two call sites and two depths give different stacks; the same site and depth the same one
    assert with_python[0] != with_python[1] and with_python[2] != with_python[0]
    assert with_python[2] == with_python[4] and with_python[3] == with_python[5]
    assert any("_site_a" in line for line in with_python[0]) and any("_site_b" in line for line in with_python[1])
