"""Compare two checkpoints: pair the keys (optionally renamed), measure each pair, write JSON + xlsx worst first."""
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from msprobe.core.ckpt_compare.metrics import STATUS_ORDER, pair_metrics
from msprobe.core.ckpt_compare.readers import (CheckpointReader, Opener, StoredTensor, locate_checkpoint,
                                               open_checkpoint)
from msprobe.core.io.xlsx import Sheet, write_xlsx
from msprobe.core.errors import ConfigError
from msprobe.core.log import logger
from msprobe.core.paths import atomic_write_json, load_json, load_yaml, make_dir

__all__ = ["KeyMap", "compare_checkpoints", "print_summary", "CkptCompareResult", "COLUMNS"]

COLUMNS = [("key1", "Key (ckpt1)"), ("key2", "Key (ckpt2)"), ("status", "Status"), ("shape1", "Shape 1"),
           ("shape2", "Shape 2"), ("dtype1", "Dtype 1"), ("dtype2", "Dtype 2"), ("numel1", "Numel 1"),
           ("numel2", "Numel 2"), ("l2_1", "L2 1"), ("l2_2", "L2 2"), ("rel_l2_diff", "Rel L2 Diff"),
           ("norm_ratio", "Norm Ratio"), ("cosine", "Cosine"),
           ("max_abs_diff", "Max Abs Diff"), ("max_rel_diff", "Max Rel Diff")]


# the settings file peft writes next to an adapter's weights
ADAPTER_CONFIG = "adapter_config.json"

# xlsx row fill per status: plain for agreement, yellow for a dtype change with equal values, red otherwise
_ROW_STYLE = {"equal": 0, "value equal": 0, "dtype differs": 1}


@dataclass
class KeyMap:
    """Renames applied to ckpt1's keys before pairing: exact names from a file, then regex rules in order."""
    exact: Dict[str, str] = field(default_factory=dict)
    rules: List[Tuple["re.Pattern[str]", str]] = field(default_factory=list)

    @classmethod
    def parse(cls, specs: Sequence[str]) -> "KeyMap":
        """Each spec is a JSON/YAML file of {ckpt1 key: ckpt2 key}, or `PATTERN=>REPLACEMENT` (Python regex)."""
        mapping = cls()
        for spec in specs or ():
            if "=>" in spec:
                pattern, replacement = spec.split("=>", 1)
                try:
                    mapping.rules.append((re.compile(pattern), replacement))
                except re.error as exc:
                    raise ConfigError(f"--key-map rule {pattern!r} is not a valid regular expression: {exc}.") from None
                continue
            loaded = load_yaml(spec, "--key-map file") if spec.endswith((".yaml", ".yml")) \
                else load_json(spec, "--key-map file")
            if not isinstance(loaded, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                       for k, v in loaded.items()):
                raise ConfigError(f"--key-map file {spec!r} must map ckpt1 key names to ckpt2 key names.")
            mapping.exact.update(loaded)
        return mapping

    def __call__(self, key: str) -> str:
        if key in self.exact:
            return self.exact[key]
        for pattern, replacement in self.rules:
            try:
                key = pattern.sub(replacement, key)
            except (re.error, IndexError) as exc:
                raise ConfigError(f"--key-map rule {pattern.pattern!r} cannot rename {key!r}: {exc}.") from None
        return key


@dataclass
class CkptCompareResult:
    rows: List[Dict[str, Any]]
    summary: Dict[str, Any]
    json_path: str
    xlsx_path: str


def _severity(row):
    """Sort key, worst first: status, NaN at different places, then the largest relative L2 difference (magnitude
    and direction), then the lowest cosine, then the largest element-wise relative difference."""
    cosine = row.get("cosine")
    return (STATUS_ORDER.get(row["status"], 2), not row.get("nan_mismatch"), -(row.get("rel_l2_diff") or 0.0),
            2.0 if cosine is None else cosine, -(row.get("max_rel_diff") or 0.0))


def _pair_rows(first: CheckpointReader, second: CheckpointReader, key_map: KeyMap):
    second_keys = second.keys()
    remaining = dict.fromkeys(second_keys)
    renamed: Dict[str, str] = {}
    for key in first.keys():
        target = key_map(key)
        if target in renamed:
            raise ConfigError(f"--key-map renames both {renamed[target]!r} and {key!r} to {target!r}.")
        renamed[target] = key
    from tqdm import tqdm

    # a bar on a terminal only (disable=None), for checkpoints of thousands of parameters
    for target, key in tqdm(renamed.items(), total=len(renamed), desc="ckpt_compare", disable=None, leave=False):
        if target not in remaining:
            yield {"key1": key, "key2": None, "status": "only in ckpt1", **_side(first.read(key), "1")}
            continue
        del remaining[target]
        yield {"key1": key, "key2": target, **pair_metrics(first.read(key), second.read(target))}
    for key in remaining:
        yield {"key1": None, "key2": key, "status": "only in ckpt2", **_side(second.read(key), "2")}


def _side(stored: StoredTensor, n: str):
    return {f"shape{n}": list(stored.shape), f"dtype{n}": stored.dtype,
            f"numel{n}": None if stored.raw is None else int(stored.raw.size)}


def _folder_facts(ckpt1: str, ckpt2: str) -> Dict[str, Any]:
    """For folders: the file each side read (`ckpt1_read`), and the settings two adapter folders' adapter_config.json
    disagree on (`adapter_config_differs`: {setting: [ckpt1's, ckpt2's]}; lora_alpha / r scale every update)."""
    facts: Dict[str, Any] = {}
    configs: List[Dict[str, Any]] = []
    for n, path in (("1", ckpt1), ("2", ckpt2)):
        if os.path.isdir(path):
            facts[f"ckpt{n}_read"] = locate_checkpoint(path)[0]
            config = os.path.join(path, ADAPTER_CONFIG)
            loaded = load_json(config, ADAPTER_CONFIG) if os.path.isfile(config) else None
            if isinstance(loaded, dict):
                configs.append(loaded)
    if len(configs) == 2:
        first, second = configs
        facts["adapter_config_differs"] = {key: [first.get(key), second.get(key)] for key in sorted({*first, *second})
                                           if first.get(key) != second.get(key)}
    return facts


def compare_checkpoints(ckpt1: str, ckpt2: str, output_dir: str, key_map: Optional[KeyMap] = None,
                        openers: Tuple[Opener, ...] = ()) -> CkptCompareResult:
    """Compare `ckpt1` with `ckpt2` and write `ckpt_compare_{time}.json` and `.xlsx` into `output_dir`."""
    first, second = open_checkpoint(ckpt1, openers), open_checkpoint(ckpt2, openers)
    output_dir = make_dir(output_dir, what="-o")
    rows = sorted(_pair_rows(first, second, key_map or KeyMap()), key=_severity)
    counts: Dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    summary = {"ckpt1": os.path.abspath(ckpt1), "ckpt2": os.path.abspath(ckpt2), **_folder_facts(ckpt1, ckpt2),
               "pairs": len(rows), "counts": counts, "worst": rows[0]["key1"] or rows[0]["key2"] if rows else None}
    stamp = time.strftime("%Y%m%d%H%M%S")
    json_path = os.path.join(output_dir, f"ckpt_compare_{stamp}.json")
    xlsx_path = os.path.join(output_dir, f"ckpt_compare_{stamp}.xlsx")
    atomic_write_json(json_path, {"summary": summary, "parameters": rows})
    styles = [_ROW_STYLE.get(row["status"], 2) for row in rows]
    columns = [[_cell(row.get(name)) for row in rows] for name, _ in COLUMNS]
    write_xlsx(xlsx_path, [Sheet("ckpt_compare", [title for _, title in COLUMNS], columns, styles,
                                 freeze_header=True)])
    logger.info("ckpt_compare wrote %s and %s", json_path, xlsx_path)
    return CkptCompareResult(rows, summary, json_path, xlsx_path)


def print_summary(result: CkptCompareResult, top: int = 10) -> None:
    """The counts per status and the `top` worst pairs, on the terminal."""
    from msprobe.core.terminal import print_table

    counts = result.summary["counts"]
    differing = sum(n for status, n in counts.items() if _ROW_STYLE.get(status, 2))
    print(f"ckpt_compare: {result.summary['pairs']} keys, {differing} differ "
          f"({', '.join(f'{n} {status}' for status, n in sorted(counts.items())) or 'none'}).")
    worst = [row for row in result.rows if _ROW_STYLE.get(row["status"], 2)][:top]
    if worst:
        print_table(f"worst {len(worst)} of {differing}",
                    ["key", "status", "rel L2 diff", "norm ratio", "cosine", "max abs diff", "max rel diff"],
                    [[row["key1"] or row["key2"], row["status"], _num(row.get("rel_l2_diff")),
                      _num(row.get("norm_ratio")), _num(row.get("cosine")), _num(row.get("max_abs_diff")),
                      _num(row.get("max_rel_diff"))] for row in worst],
                    styles=["red" if _ROW_STYLE.get(row["status"], 2) == 2 else "yellow" for row in worst])
    for setting, (first, second) in result.summary.get("adapter_config_differs", {}).items():
        print(f"{ADAPTER_CONFIG} differs: {setting} {str(first)[:60]} -> {str(second)[:60]}")
    print(f"report: {result.xlsx_path}\n        {result.json_path}")


def _num(value):
    return "" if value is None else f"{value:.6g}"


def _cell(value):
    if isinstance(value, list):
        return str(value)
    return value
