"""Compare two config_check packs: every difference per check, ranked by how likely it changes numerics."""
import json
import os
import re
import time
import zipfile
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from msprobe.core.bounded_walk import Budget, Walk
from msprobe.core.config_check.pack import CHECKS
from msprobe.core.config_check.pack_shape import checked_pack
from msprobe.core.errors import ParseError
from msprobe.core.io.xlsx import Sheet, write_xlsx
from msprobe.core.paths import atomic_write_json, check_path, make_dir

__all__ = ["Difference", "compare_packs", "load_pack", "IMPACT_ORDER"]

IMPACT_ORDER = {"high": 0, "medium": 1, "low": 2}
_MAX_ENTRY_BYTES = 256 * 1024 * 1024
# what one pack may hold once parsed (all its checks together) and what a report of two packs may write: real
# packs hold thousands of values (a parameter, a package, a variable each), far from these
PACK_BUDGET = Budget(nodes=2_000_000, elements=200_000, output_bytes=256 * 1024 * 1024, depth=32)
# versions of these packages change kernels, defaults or numerics directly
_NUMERIC_PACKAGES = re.compile(r"^(torch|torch-npu|torchvision|mindspore|numpy|scipy|transformers|accelerate|"
                               r"deepspeed|megatron-core|apex|triton|flash-attn|xformers|jax|jaxlib|"
                               r"nvidia-.*|cuda-.*|mkl|intel-openmp|onnxruntime|peft|safetensors)$")
_NUMERIC_FACTS = re.compile(r"^(torch|mindspore|cuda_version|deterministic.*|cudnn_.*|default_dtype|"
                            r"matmul_allow_tf32|float32_matmul_precision|mode|jit_level|devices|device_target)$")
_NUMERIC_ENV = re.compile(r"^(NVIDIA_TF32_OVERRIDE|CUBLAS_WORKSPACE_CONFIG|CUBLASLT_.*|CUDNN_.*|NCCL_ALGO|"
                          r"NCCL_PROTO|HCCL_DETERMINISTIC|ASCEND_LAUNCH_BLOCKING|TORCH_ALLOW_TF32.*|"
                          r"MS_DEV_.*|MS_ENABLE_.*|OMP_NUM_THREADS|MKL_.*|OPENBLAS_.*|XLA_FLAGS|"
                          r"PYTORCH_NPU_.*|INF_NAN_MODE_ENABLE|CUDA_VISIBLE_DEVICES|WORLD_SIZE|RANK_SIZE)$")
_SYSTEM_ENV = re.compile(r"^(PATH|LD_LIBRARY_PATH|PYTHONPATH|LD_PRELOAD|PYTHONHASHSEED|.*_HOME|CONDA_.*|"
                         r"VIRTUAL_ENV)$")
_NUMERIC_HYPER = re.compile(r"(^|[._])(lr|learning_rate|batch.*|micro_batch.*|global_batch.*|seed|dtype|precision|"
                            r"fp16|bf16|fp32|amp|eps|epsilon|weight_decay|beta\d?|momentum|warmup.*|clip.*|"
                            r"grad_clip|max_grad_norm|loss_scale.*|gradient_accumulation.*|accum.*|optimizer|"
                            r"scheduler|lr_.*|dropout.*|init.*|seq_len.*|max_len.*|hidden.*|layers?|heads?|"
                            r"num_.*|tp|pp|dp|tensor_parallel.*|pipeline_parallel.*|sequence_parallel)$",
                            re.IGNORECASE)


@dataclass
class Difference:
    check: str
    item: str
    a: Any
    b: Any
    impact: str
    note: str = ""


def load_pack(path: str) -> Dict[str, Any]:
    """The checks of one pack; a file that is not one gives one ParseError line."""
    path = check_path(path, kind="file", what="config_check pack")
    walk = Walk(path, PACK_BUDGET)  # the values of all the pack's checks together, counted before each is parsed
    try:
        with zipfile.ZipFile(path) as archive:
            pack = {}
            for name in ("meta",) + CHECKS:
                try:
                    info = archive.getinfo(f"{name}.json")
                except KeyError:
                    raise ParseError(f"{path} is not a config_check pack: it has no {name}.json.") from None
                if info.file_size > _MAX_ENTRY_BYTES:
                    raise ParseError(f"{path}: {name}.json is larger than {_MAX_ENTRY_BYTES >> 20} MB.")
                data = archive.read(info)
                walk.visit_json(data)
                pack[name] = json.loads(data.decode("utf-8"))
    except (zipfile.BadZipFile, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ParseError(f"{path} is not a config_check pack: {' '.join(str(exc).split())[:200]}") from None
    except (RuntimeError, NotImplementedError) as exc:  # an encrypted member, an unknown compression method
        raise ParseError(f"{path}: a member cannot be read ({' '.join(str(exc).split())[:200]}).") from None
    if not all(isinstance(pack[name], dict) for name in pack):
        raise ParseError(f"{path} is not a config_check pack: a check is not a JSON object.")
    return checked_pack(pack, path)


def _dict_differences(check, a, b, impact_of) -> List[Difference]:
    found = []
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key, "(absent)"), b.get(key, "(absent)")
        if left != right:
            found.append(Difference(check, key, left, right, impact_of(key)))
    return found


def _env_impact(name):
    return "high" if _NUMERIC_ENV.match(name) else "medium" if _SYSTEM_ENV.match(name) else "low"


def _weights(a, b) -> List[Difference]:
    found = []
    for name in sorted(set(a) | set(b)):
        left, right = a.get(name), b.get(name)
        if left == right:
            continue
        if left is None or right is None:
            note = "only in A" if right is None else "only in B"
        elif left["shape"] != right["shape"] or left["dtype"] != right["dtype"]:
            note = "shape or dtype differs"
        else:
            note = "initial values differ"
        found.append(Difference("weights", name, _short(left), _short(right), "high", note))
    return found


def _short(fingerprint):
    if not isinstance(fingerprint, dict):
        return fingerprint
    return f"{fingerprint.get('dtype')}{fingerprint.get('shape')} sha256:{str(fingerprint.get('sha256'))[:12]}"


def _dataset(a, b) -> List[Difference]:
    if not a.get("recorded") or not b.get("recorded"):
        return [] if a.get("recorded") == b.get("recorded") else \
            [Difference("dataset", "recorded", a.get("recorded"), b.get("recorded"), "low",
                        "only one run called ConfigChecker.apply_patches")]
    found = []
    first_a, first_b = a.get("batches", []), b.get("batches", [])
    for n in range(max(len(first_a), len(first_b))):
        left = first_a[n] if n < len(first_a) else None
        right = first_b[n] if n < len(first_b) else None
        if (left or {}).get("sha256") == (right or {}).get("sha256"):
            continue
        detail = ""
        if left and right:
            parted = [x["path"] for x, y in zip(left["tensors"], right["tensors"]) if x != y]
            detail = f"differs in {', '.join(parted[:5])}" if parted else "different tensors"
        found.append(Difference("dataset", f"batch {n}", (left or {}).get("sha256", "(absent)")[:16],
                                (right or {}).get("sha256", "(absent)")[:16], "high", detail))
    return found


def _random(a, b) -> List[Difference]:
    if not a.get("recorded") or not b.get("recorded"):
        return []
    found = []
    seeds_a = [(s["api"], s["args"], s["kwargs"]) for s in a.get("seeds", [])]
    seeds_b = [(s["api"], s["args"], s["kwargs"]) for s in b.get("seeds", [])]
    for n in range(max(len(seeds_a), len(seeds_b))):
        left = seeds_a[n] if n < len(seeds_a) else "(absent)"
        right = seeds_b[n] if n < len(seeds_b) else "(absent)"
        if left != right:
            found.append(Difference("random", f"seed call {n}", _call(left), _call(right), "high"))
    draws_a, draws_b = a.get("draws", {}), b.get("draws", {})
    for api in sorted(set(draws_a) | set(draws_b)):
        left, right = draws_a.get(api, {}), draws_b.get(api, {})
        if left.get("state_before_first") != right.get("state_before_first"):
            found.append(Difference("random", f"{api}: generator state before the first call",
                                    left.get("first_where", "(not called)"), right.get("first_where", "(not called)"),
                                    "high", "the random streams part here"))
        elif left.get("calls") != right.get("calls"):
            found.append(Difference("random", f"{api}: calls", left.get("calls", 0), right.get("calls", 0),
                                    "medium"))
    return found


def _call(entry):
    if isinstance(entry, str):
        return entry
    api, args, kwargs = entry
    return f"{api}({', '.join(list(args) + [f'{k}={v}' for k, v in kwargs.items()])})"


def differences(pack_a: Dict[str, Any], pack_b: Dict[str, Any]) -> List[Difference]:
    """Every difference of the two packs, most likely to change numerics first."""
    found = (_dict_differences("framework", pack_a["framework"], pack_b["framework"],
                               lambda key: "high" if _NUMERIC_FACTS.match(key) else "low")
             + _dict_differences("packages", pack_a["packages"], pack_b["packages"],
                                 lambda key: "high" if _NUMERIC_PACKAGES.match(key) else "low")
             + _dict_differences("environment", pack_a["environment"], pack_b["environment"], _env_impact)
             + _dict_differences("hyperparameters", pack_a["hyperparameters"], pack_b["hyperparameters"],
                                 lambda key: "high" if _NUMERIC_HYPER.search(key) else "medium")
             + _weights(pack_a["weights"], pack_b["weights"])
             + _dataset(pack_a["dataset"], pack_b["dataset"])
             + _random(pack_a["random"], pack_b["random"]))
    order = {check: n for n, check in enumerate(CHECKS)}
    return sorted(found, key=lambda d: (IMPACT_ORDER[d.impact], order[d.check]))


def _cell(value):
    return value if isinstance(value, (int, float, str)) or value is None else json.dumps(value, default=repr)[:2000]


def compare_packs(path_a: str, path_b: str, output_dir: str) -> Tuple[List[Difference], str, str]:
    """Write `config_check_{time}.xlsx` (a ranked summary sheet, then one sheet per check) and `.json`."""
    found = differences(load_pack(path_a), load_pack(path_b))
    walk = Walk(f"the report of {path_a} and {path_b}", PACK_BUDGET)
    walk.materialise(len(found))
    for difference in found:
        walk.emit(len(json.dumps(difference.__dict__, default=repr, ensure_ascii=False)))
    output_dir = make_dir(output_dir, what="-o")
    stamp = time.strftime("%Y%m%d%H%M%S")
    xlsx_path = os.path.join(output_dir, f"config_check_{stamp}.xlsx")
    json_path = os.path.join(output_dir, f"config_check_{stamp}.json")
    header = ["Check", "Item", "A", "B", "Impact", "Note"]

    def sheet(name, rows):
        columns = [[_cell(getattr(d, field)) for d in rows] for field in ("check", "item", "a", "b", "impact", "note")]
        styles = [2 if d.impact == "high" else 1 if d.impact == "medium" else 0 for d in rows]
        return Sheet(name, header, columns, styles, freeze_header=True)

    write_xlsx(xlsx_path, [sheet("summary", found)] + [sheet(check, [d for d in found if d.check == check])
                                                         for check in CHECKS])
    atomic_write_json(json_path, {"a": os.path.abspath(path_a), "b": os.path.abspath(path_b),
                                  "differences": [d.__dict__ for d in found]})
    return found, xlsx_path, json_path
