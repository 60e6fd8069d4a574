"""The house check of wave 4's lean hot path: no file under msprobe/ uses torch's or CPython's non-public names that
the dump once relied on (docs/architecture.md, "Non-public names we use"), and the C kernels use no private CPython
API (names starting with _Py) at all."""
import pathlib
import re

import msprobe

_ROOT = pathlib.Path(msprobe.__file__).parent
_PRIVATE = re.compile(r"_HookMixin|_backward_hooks|_register_hook_dict|_PyType_Lookup|_KnownHash|wr_callback"
                      r"|_PyDict_NewPresized|_grad_walk")
# _PyBytes_Resize is the one underscored name the C API reference documents (Concrete Objects Layer, Bytes)
_PRIVATE_C = re.compile(r"\b_Py(?!Bytes_Resize\b)[A-Za-z]\w*|\bPyFrame_\w+|ob_refcnt|ob_type->|tp_dict\b")


def test_no_module_of_msprobe_uses_the_retired_private_names():
    found = []
    for path in sorted(_ROOT.rglob("*")):
        if path.suffix not in (".py", ".c", ".h") or not path.is_file():
            continue
        relative = path.relative_to(_ROOT).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            for match in _PRIVATE.finditer(line):
                found.append(f"msprobe/{relative}:{number}: {match.group()}")
            if path.suffix in (".c", ".h"):
                found += [f"msprobe/{relative}:{number}: {m.group()}" for m in _PRIVATE_C.finditer(line)]
    assert not found, "non-public names outside docs/architecture.md's list:\n" + "\n".join(found)


def test_the_check_sees_a_use():
    assert _PRIVATE.search("hooks = value._backward_hooks") and _PRIVATE.search("_PyDict_GetItem_KnownHash(d, k, h)")
    assert _PRIVATE_C.search("PyObject *v = _PyDict_GetItem_KnownHash(d, k, h);")
    assert _PRIVATE_C.search("int lasti = PyFrame_GetLasti(frame);") and not _PRIVATE_C.search("Py_DECREF(x);")
    assert not _PRIVATE_C.search("_PyBytes_Resize(&out, size)")
    assert sorted(path.name for path in (_ROOT / "_native").glob("*.c"))  # the kernels are where the check looks
