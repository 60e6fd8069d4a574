"""MindSpore test fixtures: the CPU PyNative context; helpers live in ms_test_helpers.py."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def ms():
    import mindspore
    try:
        mindspore.set_device("CPU")
    except RuntimeError:  # a test module already ran kernels: the runtime keeps its device (CPU here)
        assert mindspore.get_context("device_target") == "CPU"
    mindspore.set_context(mode=mindspore.PYNATIVE_MODE)
    return mindspore
