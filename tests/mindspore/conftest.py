"""MindSpore tests: helpers live in ms_test_helpers.py; the `ms` fixture (CPU, PyNative) is in tests/conftest.py."""
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
