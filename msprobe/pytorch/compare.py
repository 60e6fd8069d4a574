"""PyTorch compare API: `compare(input_param, output_path, ...)` and `compare_distributed(...)`.

    from msprobe.pytorch import compare
    compare({"npu_json_path": "npu/dump.json", "bench_json_path": "gpu/dump.json",
             "stack_json_path": "npu/stack.json", "is_print_compare_log": True},
            output_path="./output", stack_mode=True)

Thin wrapper over msprobe.core.compare; importing it does not import torch.
"""
from msprobe.core.compare import CompareOptions, compare_dumps
from msprobe.core.errors import ConfigError

__all__ = ["compare", "compare_distributed", "options_from"]

_FIELDS = {"npu_json_path": "npu_path", "bench_json_path": "bench_path", "stack_json_path": "stack_path"}


def options_from(input_param=None, **kwargs):
    """CompareOptions from an input_param dict (either key style) and keyword options."""
    input_param = input_param or {}
    options = CompareOptions(
        stack_mode=bool(kwargs.get("stack_mode", False)),
        stack_path=input_param.get("stack_json_path") or input_param.get("stack_path"),
        auto_analyze=bool(kwargs.get("auto_analyze", True)),
        fuzzy_match=bool(kwargs.get("fuzzy_match", False)),
        diff_only=bool(kwargs.get("diff_only", False)),
        data_mapping=kwargs.get("data_mapping"), api_mapping=kwargs.get("api_mapping"),
        cell_mapping=kwargs.get("cell_mapping"), layer_mapping=kwargs.get("layer_mapping"),
        processes=kwargs.get("processes"),
        is_print_compare_log=bool(input_param.get("is_print_compare_log", True)))
    return options


def _paths(input_param):
    if not isinstance(input_param, dict):
        raise ConfigError("input_param must be a dict with 'npu_json_path' and 'bench_json_path'.")
    npu = input_param.get("npu_json_path") or input_param.get("npu_path")
    bench = input_param.get("bench_json_path") or input_param.get("bench_path")
    if not npu or not bench:
        raise ConfigError("input_param needs 'npu_json_path' and 'bench_json_path' (or npu_path / bench_path).")
    return npu, bench


def compare(input_param, output_path, stack_mode=False, auto_analyze=True, fuzzy_match=False, **kwargs):
    """Compare two dumps and write compare_result_{timestamp}.xlsx (and advisor) into output_path.

    Returns the list of CompareOutcome (xlsx_path, advisor_path, result)."""
    npu, bench = _paths(input_param)
    options = options_from(input_param, stack_mode=stack_mode, auto_analyze=auto_analyze,
                           fuzzy_match=fuzzy_match, **kwargs)
    return compare_dumps(npu, bench, output_path, options)


def compare_distributed(npu_dump_dir, bench_dump_dir, output_path, **kwargs):
    """Compare every rank of two step directories (or dump roots); stack.json is picked up per rank."""
    kwargs.pop("stack_mode", None)
    return compare_dumps(npu_dump_dir, bench_dump_dir, output_path, options_from({}, **kwargs))


class _CallableModule(type(__import__("sys"))):
    """Once this submodule is imported, `msprobe.pytorch.compare` names the module, not the function;
    making the module callable keeps `from msprobe.pytorch import compare; compare(...)` working."""

    def __call__(self, *args, **kwargs):
        return compare(*args, **kwargs)


__import__("sys").modules[__name__].__class__ = _CallableModule
