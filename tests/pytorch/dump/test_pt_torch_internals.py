"""The non-public torch names the dump uses (docs/architecture.md, "Non-public names we use"): each exists in the
installed torch with the shape the dump relies on. A torch that renames or reshapes one fails here with a message that
names it, instead of a dump that silently loses calls, hooks or gradients."""
import pytest
import torch
import torch.nn as nn

from msprobe.pytorch.dump import api_hooks, api_names


def _lookup(dotted):
    """The object at `dotted` ("torch._C._autograd._get_sequence_nr"), or a failure naming the first missing part."""
    parts = dotted.split(".")
    value = __import__(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        if not hasattr(value, part):
            pytest.fail(f"torch {torch.__version__} has no `{'.'.join(parts[:index + 1])}`: msprobe's dump uses "
                        f"`{dotted}` (docs/architecture.md, 'Non-public names we use'); adapt the place that table "
                        f"names before releasing for this torch")
        value = getattr(value, part)
    return value


def _require(condition, name, what):
    if not condition:
        pytest.fail(f"torch {torch.__version__} changed `{name}`: {what} no longer holds (docs/architecture.md, "
                    f"'Non-public names we use')")


def test_sequence_numbers_tell_a_calls_nodes_from_older_ones():
    next_sequence_nr = _lookup("torch._C._autograd._get_sequence_nr")
    x = torch.ones(3, requires_grad=True)
    older = (x * 2).grad_fn
    _require(hasattr(older, "_sequence_nr"), "Node._sequence_nr", "an autograd node has _sequence_nr()")
    start = next_sequence_nr()
    _require(type(start) is int, "torch._C._autograd._get_sequence_nr", "it returns an int")
    newer = (x * 3).exp().grad_fn
    _require(type(newer._sequence_nr()) is int and newer._sequence_nr() >= start
             and newer.next_functions[0][0]._sequence_nr() >= start and older._sequence_nr() < start,
             "Node._sequence_nr / _get_sequence_nr", "nodes made after _get_sequence_nr() have numbers >= it, "
             "older nodes smaller ones")


def test_torch_functions_can_be_turned_off_for_modes_and_for_subclasses():
    off, no_subclass = _lookup("torch._C.DisableTorchFunction"), _lookup("torch._C.DisableTorchFunctionSubclass")
    seen = []

    class Recorder(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    class Sub(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(cls)
            return super().__torch_function__(func, types, args, kwargs)

    with Recorder():
        with off():
            torch.ones(2).sum()
        _require(seen == [], "torch._C.DisableTorchFunction", "a TorchFunctionMode sees no call inside it")
    sub = torch.ones(2).as_subclass(Sub)
    with no_subclass():
        sub.sum()
    _require(seen == [], "torch._C.DisableTorchFunctionSubclass", "a subclass's __torch_function__ is not called")
    sub.sum()
    assert seen == [Sub]  # the check above can fail: outside, the subclass is called


def test_every_operator_of_the_list_is_a_tensor_attribute_whose_wrapper_python_calls():
    """Wrapping Tensor's operator dunders (api_hooks.install) names `a * b` "Tensor.__mul__": each operator of the
    API list is found on torch.Tensor (none dropped by operator_names' hasattr), and an operator set on torch.Tensor
    is the one `a * b` runs, its call then reaching a TorchFunctionMode."""
    base = _lookup("torch._C.TensorBase")
    _require(issubclass(torch.Tensor, base), "torch._C.TensorBase", "torch.Tensor derives from it")
    listed = [n for n in api_names._reference_lists()["tensor"] if n.startswith("__") and n.endswith("__")]
    missing = [n for n in listed + api_names._REFLECTED
               if n not in api_names._SELF_NAMING and not hasattr(torch.Tensor, n)]
    _require(not missing, f"Tensor.{missing[0] if missing else ''}", "every listed Tensor operator exists")
    names = api_names.operator_names()
    assert "__mul__" in names and "__rsub__" in names and "__matmul__" in names
    seen = []

    class Recorder(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(api_hooks._MARK.key)
            api_hooks._MARK.key = None
            return func(*args, **(kwargs or {}))

    a, b = torch.ones(2, 2), torch.ones(2, 2)
    saved = {name: vars(torch.Tensor).get(name) for name in ("__mul__", "__rsub__", "__matmul__")}
    try:
        for name in saved:
            setattr(torch.Tensor, name, api_hooks._marking(name, getattr(torch.Tensor, name)))
        with Recorder():
            a * b, 1 - a, a @ b  # noqa: B018
    finally:
        for name, value in saved.items():
            if value is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, value)
    _require(seen[:3] == ["Tensor.__mul__", "Tensor.__rsub__", "Tensor.__matmul__"], "Tensor operator dunders",
             "an operator set on torch.Tensor is what `a * b`, `1 - a` and `a @ b` call")


def test_a_tensors_version_counts_its_in_place_changes():
    x = torch.zeros(3)
    _require(hasattr(x, "_version"), "Tensor._version", "a tensor has a version counter")
    before, view = x._version, x[1:]
    view.add_(1)
    _require(type(before) is int and x._version > before and view._version == x._version, "Tensor._version",
             "an in-place change through a view raises the version of its base")


def test_output_nr_and_next_functions_give_a_tensors_gradient_edge():
    x = torch.ones(4, requires_grad=True)
    first, second = (x * 1).unbind()[:2]
    _require(first.output_nr == 0 and second.output_nr == 1, "Tensor.output_nr", "each output's index in its node")
    accumulate = x.view_as(x).grad_fn.next_functions[0][0]
    _require(type(accumulate).__name__ == "AccumulateGrad" and accumulate.variable is x,
             "Node.next_functions", "a leaf's view leads to its AccumulateGrad node")


def test_the_dispatch_mode_and_the_aten_op_list():
    mode = _lookup("torch.utils._python_dispatch.TorchDispatchMode")
    assert mode is not None
    names = _lookup("torch._C._dispatch_get_all_op_names")()
    _require("aten::add.Tensor" in set(names), "torch._C._dispatch_get_all_op_names", "it lists aten::add.Tensor")


def test_the_names_beside_compiled_regions_and_the_data_loader():
    """compiled.py: a module compiled by `module.compile()` keeps its compiled call in `_compiled_call_impl`; the
    eager call is `Module._call_impl`; the modes are popped around a compiled call; module hooks are kept out of
    dynamo with `torch._dynamo.disable`. dataloader_driver.py wraps the loader iterator's `__next__`."""
    iterator = _lookup("torch.utils.data.dataloader._BaseDataLoaderIter")
    _require("__next__" in vars(iterator), "_BaseDataLoaderIter.__next__", "the iterator class defines __next__")
    _require(callable(_lookup("torch._dynamo.disable")), "torch._dynamo.disable", "it is callable")
    _lookup("torch.overrides._get_current_function_mode")
    _lookup("torch.overrides._pop_mode_temporarily")
    _lookup("torch.utils._python_dispatch._get_current_dispatch_mode")
    _lookup("torch.utils._python_dispatch._pop_mode_temporarily")
    _require(callable(getattr(nn.Module, "_call_impl", None)), "nn.Module._call_impl", "the eager call exists")
    module = nn.Linear(2, 2)
    module.compile(backend="eager")
    _require(module.__dict__.get("_compiled_call_impl") is not None, "nn.Module._compiled_call_impl",
             "module.compile() sets it on the instance")

    class Mode(torch.overrides.TorchFunctionMode):
        pass
    with Mode() as mode:
        _require(torch.overrides._get_current_function_mode() is mode, "torch.overrides._get_current_function_mode",
                 "it returns the innermost mode")
        with torch.overrides._pop_mode_temporarily():
            _require(torch.overrides._get_current_function_mode() is not mode, "torch.overrides._pop_mode_temporarily",
                     "the mode is off the stack inside it")


def test_an_operators_schema_names_its_arguments_types_and_writes():
    """replay_guard judges an ATen operator by `OpOverload._schema` (docs/security.md): a renamed field would let an
    operator with effects outside tensors through, or refuse every operator."""
    schema = _lookup("torch.ops.aten.from_file.default")._schema
    by_name = {argument.name: argument for argument in schema.arguments}
    _require("filename" in by_name and str(by_name["filename"].type) == "str", "OpOverload._schema.arguments",
             "aten::from_file names its `filename` argument with type str")
    add_out = _lookup("torch.ops.aten.add_.Tensor")._schema
    _require(add_out.arguments[0].alias_info is not None and add_out.arguments[0].alias_info.is_write,
             "Argument.alias_info.is_write", "aten::add_ marks its self argument as written")
    _require(bool(schema.returns) and schema.name == "aten::from_file", "FunctionSchema.returns / .name",
             "a schema lists its returns and its qualified name")
