"""The Python versions msprobe declares: setup.py's python_requires, its classifiers, README's "Versions" table and the
interpreter the suite runs on all name the same versions (the ones CI tests)."""
import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CLAUSE = re.compile(r"(>=|<=|==|!=|<|>)\s*(\d+)\.(\d+)(\.\*)?$")


def _setup_keywords():
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    [call] = [node for node in ast.walk(tree)
              if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setup"]
    return {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords
            if keyword.arg in ("python_requires", "classifiers")}


def _allows(spec, minor):
    """Whether a python_requires of X.Y clauses (>=, <=, <, >, ==, != with an optional .*) admits 3.`minor`."""
    for clause in spec.split(","):
        match = _CLAUSE.match(clause.strip())
        assert match, f"python_requires clause this test does not read: {clause!r}"
        operator, version = match.group(1), (int(match.group(2)), int(match.group(3)))
        if not {">=": (3, minor) >= version, "<=": (3, minor) <= version, "<": (3, minor) < version,
                ">": (3, minor) > version, "==": (3, minor) == version, "!=": (3, minor) != version}[operator]:
            return False
    return True


def _declared_minors(spec):
    return [minor for minor in range(0, 40) if _allows(spec, minor)]


def test_the_clause_reader_reads_ranges():
    assert _declared_minors(">=3.11,<3.12") == [11]
    assert _declared_minors("==3.11.*") == [11]
    assert _declared_minors(">=3.9,!=3.10") == [9] + list(range(11, 40))


def test_python_requires_names_the_versions_the_classifiers_name():
    keywords = _setup_keywords()
    declared = _declared_minors(keywords["python_requires"])
    # an open upper end would declare versions nobody has run
    assert declared and declared[-1] < 39, keywords["python_requires"]
    classified = sorted(int(text.rsplit(".", 1)[1]) for text in keywords["classifiers"]
                        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", text))
    assert classified == declared


def test_readme_versions_table_names_the_declared_pythons():
    keywords = _setup_keywords()
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        [row] = [line for line in handle if line.startswith("| Python |")]
    assert f"`{keywords['python_requires']}`" in row
    for minor in _declared_minors(keywords["python_requires"]):
        assert f"3.{minor}" in row


def test_the_suite_runs_on_a_declared_python():
    assert sys.version_info.major == 3
    assert sys.version_info.minor in _declared_minors(_setup_keywords()["python_requires"]), sys.version
