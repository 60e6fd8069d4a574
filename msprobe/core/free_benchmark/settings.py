"""The "free_benchmark" config section as one object: the rules between its keys and the API selection.

The section's single keys are validated by msprobe/core/config.py; the combinations are checked here,
when the task is built (PrecisionDebugger(...)), each with one ConfigError line naming the combination.
"""
from dataclasses import dataclass
from typing import FrozenSet, Tuple

from msprobe.core.errors import ConfigError

__all__ = ["FreeBenchmarkSettings", "DEFAULT_MAX_SAMPLE", "FIX_MODES", "MINDSPORE_MODES", "mindspore_dump_key"]

#: documented default of max_sample (1.2.1's code used 15, its docs 20: we follow the docs)
DEFAULT_MAX_SAMPLE = 20
FIX_MODES = ("improve_precision", "to_cpu")
MINDSPORE_MODES = ("improve_precision", "add_noise", "bit_noise", "change_value", "no_change")
BENCH_DTYPES = ("float32", "float64")
# "mindspore.ops.bmm" -> dump key prefix "Functional" (the prefixes of the MindSpore L1 dump)
_MINDSPORE_NAMESPACES = (("mindspore.mint.nn.functional.", "MintFunctional."), ("mindspore.mint.", "Mint."),
                         ("mindspore.ops.", "Functional."), ("mindspore.Tensor.", "Tensor."))


def mindspore_dump_key(full_name: str) -> str:
    """'mindspore.ops.bmm' -> 'Functional.bmm' (the key our MindSpore dump gives that API)."""
    for namespace, prefix in _MINDSPORE_NAMESPACES:
        if full_name.startswith(namespace):
            return prefix + full_name[len(namespace):]
    raise ConfigError(f"config: free_benchmark.list item {full_name!r} is not a full MindSpore API name; write "
                      "e.g. 'mindspore.ops.bmm', 'mindspore.Tensor.add', 'mindspore.mint.nn.functional.relu'.")


@dataclass(frozen=True)
class FreeBenchmarkSettings:
    pert_mode: str = "improve_precision"
    handler_type: str = "check"
    fuzz_stage: str = "forward"
    fuzz_device: str = "npu"
    if_preheat: bool = False
    preheat_step: int = 15
    max_sample: int = DEFAULT_MAX_SAMPLE
    bench_dtype: str = "float32"
    scope: FrozenSet[str] = frozenset()     # exact API names "Torch.matmul.0.forward"
    parts: Tuple[str, ...] = ()            # PyTorch list: substrings of the API name
    keys: FrozenSet[str] = frozenset()      # MindSpore list: dump keys "Functional.bmm"
    framework: str = "pytorch"

    @property
    def fix(self) -> bool:
        return self.handler_type == "fix"

    @classmethod
    def from_section(cls, section: dict, framework: str = "pytorch") -> "FreeBenchmarkSettings":
        """Check the rules between keys of a validated section and build the settings."""
        get = section.get
        mode, handler, stage = get("pert_mode", "improve_precision"), get("handler_type", "check"), \
            get("fuzz_stage", "forward")
        device, preheat = get("fuzz_device", "npu"), bool(get("if_preheat", False))
        scope, parts = list(get("scope") or []), list(get("list") or [])
        bench_dtype = get("bench_dtype", "float32")
        if scope and parts:
            raise ConfigError("config: free_benchmark.scope and free_benchmark.list cannot both be set; use scope "
                              "(exact API names) or list (parts of API names).")
        if (mode == "to_cpu") != (device == "cpu"):
            raise ConfigError(f"config: free_benchmark pert_mode {mode!r} with fuzz_device {device!r}: 'to_cpu' "
                              "goes with fuzz_device 'cpu' and every other pert_mode with 'npu'.")
        if handler == "fix" and mode not in FIX_MODES:
            raise ConfigError(f"config: free_benchmark handler_type 'fix' with pert_mode {mode!r}: fix works with "
                              f"{' or '.join(FIX_MODES)} only.")
        if handler == "fix" and stage != "forward":
            raise ConfigError("config: free_benchmark handler_type 'fix' with fuzz_stage 'backward': fix works in "
                              "the forward stage only (the fixed forward output also changes the backward).")
        if handler == "fix" and preheat:
            raise ConfigError("config: free_benchmark handler_type 'fix' with if_preheat true: preheat tunes the "
                              "check thresholds; set if_preheat false.")
        if bench_dtype not in BENCH_DTYPES:
            raise ConfigError(f"config: invalid value {bench_dtype!r} for 'free_benchmark.bench_dtype'; allowed: "
                              "'float32' | 'float64'.")
        keys: FrozenSet[str] = frozenset()
        if framework == "mindspore":
            _check_mindspore(mode, handler, scope, preheat)
            keys, parts = frozenset(mindspore_dump_key(name) for name in parts), []
        return cls(pert_mode=mode, handler_type=handler, fuzz_stage=stage, fuzz_device=device, if_preheat=preheat,
                   preheat_step=get("preheat_step", 15), max_sample=get("max_sample", DEFAULT_MAX_SAMPLE),
                   bench_dtype=bench_dtype, scope=frozenset(scope), parts=tuple(parts), keys=keys,
                   framework=framework)

    def selects(self, name: str, key: str) -> bool:
        """Whether the call `name` ("Torch.prod.0.forward") of API `key` ("Torch.prod") is checked."""
        if self.scope:
            return name in self.scope
        if self.keys:
            return key in self.keys
        if self.parts:
            return any(part in name for part in self.parts)
        return True


def _check_mindspore(mode, handler, scope, preheat):
    if mode not in MINDSPORE_MODES:
        raise ConfigError(f"config: free_benchmark pert_mode {mode!r} is not available for MindSpore; use one of "
                          f"{', '.join(MINDSPORE_MODES)}.")
    if handler == "fix" and mode != "improve_precision":
        raise ConfigError("config: free_benchmark handler_type 'fix' works with pert_mode 'improve_precision' only "
                          "for MindSpore.")
    if scope:
        raise ConfigError("config: free_benchmark.scope is not available for MindSpore; name the APIs in list "
                          "(e.g. ['mindspore.ops.bmm']).")
    if preheat:
        raise ConfigError("config: free_benchmark.if_preheat is not available for MindSpore; set it to false.")
