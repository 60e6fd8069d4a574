"""Shared pytest fixtures."""
import os

import pytest

REFERENCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared",
                         "reference", "msprobe-1.2.1")
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


@pytest.fixture
def fixtures_dir():
    return FIXTURES
