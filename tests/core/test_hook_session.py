"""HookSession undoes every install step (also after a failed install); Reentrancy is per thread."""
import threading

import pytest

from msprobe.core.dump.session import HookSession, Reentrancy, WrapperCache


class Target:
    value = "class attribute"


class Handle:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def remove(self):
        self.log.append(self.name)


def test_close_restores_patched_attributes_in_reverse_order():
    log = []
    session = HookSession()
    with session.installing():
        session.add_handle(Handle(log, "first"))
        session.patch(Target, "value", "patched")
        session.patch(Target, "extra", 1)
        session.add_handle(Handle(log, "last"))
    assert Target.value == "patched" and Target.extra == 1
    session.close()
    session.close()  # idempotent
    assert log == ["last", "first"]
    assert Target.value == "class attribute" and "extra" not in Target.__dict__


def test_failed_install_rolls_back_what_was_installed():
    log = []
    session = HookSession()
    with pytest.raises(RuntimeError, match="third step"):
        with session.installing():
            session.add_handle(Handle(log, "a"))
            session.patch(Target, "value", "patched")
            raise RuntimeError("third step failed")
    assert log == ["a"] and Target.value == "class attribute" and session.closed


def test_a_failing_undo_step_leaves_the_others_undone_and_is_raised_at_the_end():
    log = []

    class Manager:
        def __enter__(self):
            log.append("enter")
            return "entered"

        def __exit__(self, *exc_info):
            log.append(("exit", exc_info))

    def fails(name):
        log.append(name)
        raise ValueError(name)

    session = HookSession()
    with session.installing():
        assert session.enter(Manager()) == "entered"
        session.callback(fails, "first failure")
        session.patch(Target, "value", "patched")
        session.callback(fails, "second failure")
        session.add_handle(Handle(log, "handle"))
    with pytest.raises(ValueError, match="second failure"):  # the first to fail: undone last first
        session.close()
    assert log == ["enter", "handle", "second failure", "first failure", ("exit", (None, None, None))]
    assert Target.value == "class attribute" and session.closed
    session.close()  # nothing runs twice
    assert len(log) == 5


def test_a_wrapper_is_built_once_for_an_original_and_again_for_a_new_one():
    built = []

    def build(name, original):
        built.append((name, original))
        return lambda: ("wrapped", name, original())

    cache = WrapperCache()
    first, second = (lambda: 1), (lambda: 2)
    wrapper = cache.get("f", first, build)
    assert cache.get("f", first, build) is wrapper and wrapper() == ("wrapped", "f", 1)
    replaced = cache.get("f", second, build)  # something else replaced the attribute: a wrapper of that
    assert replaced is not wrapper and replaced() == ("wrapped", "f", 2)
    assert built == [("f", first), ("f", second)]


def test_reentrancy_is_per_thread():
    guard = Reentrancy()
    seen = []
    with guard.inside():
        assert guard.active
        thread = threading.Thread(target=lambda: seen.append(guard.active))
        thread.start()
        thread.join()
    assert seen == [False] and not guard.active


def test_fewer_collections_raises_the_young_threshold_until_the_session_closes():
    import gc

    from msprobe.core.dump.session import fewer_collections

    before = gc.get_threshold()
    gc.set_threshold(700, before[1], before[2])
    try:
        session = HookSession()
        fewer_collections(session, young=40_000)
        assert gc.get_threshold() == (40_000, before[1], before[2])
        session.close()
        assert gc.get_threshold() == (700, before[1], before[2])
        # a threshold the user sets inside the window is theirs: closing leaves it
        session = HookSession()
        fewer_collections(session, young=40_000)
        gc.set_threshold(5_000, before[1], before[2])
        session.close()
        assert gc.get_threshold() == (5_000, before[1], before[2])
        # gc switched off by the user: nothing changes
        gc.disable()
        try:
            session = HookSession()
            fewer_collections(session, young=40_000)
            assert gc.get_threshold() == (5_000, before[1], before[2])
            session.close()
        finally:
            gc.enable()
    finally:
        gc.set_threshold(*before)
