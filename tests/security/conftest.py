"""Fixtures of the security tests: the MindSpore CPU PyNative context."""
import pytest


@pytest.fixture(scope="session")
def ms():
    import mindspore
    mindspore.set_device("CPU")
    mindspore.set_context(mode=mindspore.PYNATIVE_MODE)
    return mindspore
