"""Fixtures of the core compare tests."""
import pytest


@pytest.fixture
def out_dir(tmp_path):
    return str(tmp_path / "out")
