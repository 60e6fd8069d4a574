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


def _expected(depth_frame):
    """The text capture() must give, built independently with traceback from the frame above the test helper."""
    import traceback

    lines = []
    for summary in reversed(traceback.extract_stack(depth_frame)):
        if summary.filename.startswith(stack._MSPROBE_DIR) and "/examples/" not in summary.filename:
            continue
        lines.append(f"File {summary.filename}, line {summary.lineno}, in {summary.name}, \n {summary.line}")
    return lines[:64]  # capture's max_depth


def _probe(capture, seen):
    import sys

    seen.append((capture.capture(1), _expected(sys._getframe(0))))


def _helper(capture, seen):
    _probe(capture, seen)  # one call site, reached from several callers
    return 1


def _caller_one(capture, seen):
    return _helper(capture, seen)


def _caller_two(capture, seen):
    x = _helper(capture, seen)
    return x + _helper(capture, seen)


def _generator(capture, seen):
    for _ in range(3):
        _probe(capture, seen)
        yield


def test_captures_equal_tracebacks_text_whatever_frames_come_and_go():
    # frames of one function from different callers reuse addresses; a generator resumed from two places
    capture, seen = stack.StackCapture(), []
    for _ in range(3):
        _caller_one(capture, seen)
        _caller_two(capture, seen)
        _helper(capture, seen)
        gen = _generator(capture, seen)
        next(gen)
        _caller_one(capture, seen)
        next(gen)
        _nested(4, capture, lambda c, rest=gen: list(rest))  # the generator finished from deeper down
    assert len(seen) == 24
    for got, expected in seen:
        assert got == expected
    texts = {tuple(got) for got, _ in seen}
    assert len(texts) >= 6  # the callers are told apart
