"""MindSpore test fixtures: the CPU PyNative context; helpers live in ms_test_helpers.py."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def ms():
    import mindspore
    mindspore.set_device("CPU")
    mindspore.set_context(mode=mindspore.PYNATIVE_MODE)
    return mindspore
