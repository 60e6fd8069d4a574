"""StackCapture: stacks cached by call site (code objects and bytecode offsets), formatted once."""
from msprobe.core.dump import stack


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


def test_capture_caches_per_call_site_and_depth():
    first, second = _stacks(stack.StackCapture()), _stacks(stack.StackCapture())
    assert first == second
    # two call sites and two depths give different stacks; the same site and depth the same one
    assert first[0] != first[1] and first[2] != first[0]
    assert first[2] == first[4] and first[3] == first[5]
    assert any("_site_a" in line for line in first[0]) and any("_site_b" in line for line in first[1])
    # depth 9 holds nine more frames of _nested than depth 0
    assert sum("_nested" in line for line in first[6]) == sum("_nested" in line for line in first[0]) + 9
