"""The block the faulty graph-test dumps break (conftest.py makes them; tests name its nodes). A module of its own
name: `from conftest import ...` finds whichever conftest.py is first on sys.path when several test folders run."""
FAULT_BLOCK = 2
