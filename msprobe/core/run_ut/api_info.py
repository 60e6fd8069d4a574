"""Read the API calls recorded in an L1/mix dump.json into `ApiCase`s, and filter them.

An ApiCase pairs `{api}.forward` with its `{api}.backward` entry (if any). Module/Cell entries and
parameter gradients are ignored: run_ut tests APIs only.
"""
import json
import os
from dataclasses import dataclass, field
from typing import Optional

from msprobe.core.errors import ParseError
from msprobe.core.naming import BACKWARD, FORWARD, parse_name
from msprobe.core.paths import load_json

__all__ = ["ApiCase", "DumpInfo", "load_api_cases", "filter_by_lists", "drop_repeated_cases"]

STAT_KEYS = ("Max", "Min", "Mean", "Norm", "data_name", "md5", "requires_grad")


@dataclass
class ApiCase:
    """One recorded API call: name 'Functional.linear.0', prefix 'Functional', api 'linear'."""
    name: str
    prefix: str
    api: str
    forward: dict
    backward: Optional[dict] = None
    index: int = 0  # position in dump.json, keeps reports in a stable order


@dataclass
class DumpInfo:
    task: str
    framework: str
    tensor_dir: str  # where real tensors live (tensor task), else None
    cases: list = field(default_factory=list)

    @property
    def real_data(self):
        return self.tensor_dir is not None


def _tensor_dir(dump_json, meta):
    """Directory of the dumped tensors: dump_tensor_data beside dump.json, else the recorded path."""
    if meta.get("task") != "tensor":
        return None
    local = os.path.join(os.path.dirname(os.path.abspath(dump_json)), "dump_tensor_data")
    for candidate in (local, meta.get("dump_data_dir")):
        if isinstance(candidate, str) and candidate and os.path.isdir(candidate):
            return candidate
    raise ParseError(f"{dump_json}: task is 'tensor' but the tensor directory was not found "
                     f"(looked in '{local}' and '{meta.get('dump_data_dir')}'); copy dump_tensor_data "
                     "next to dump.json.")


def load_api_cases(dump_json):
    """DumpInfo with every API call of dump.json, forward entries in file order."""
    meta = load_json(dump_json, what="-api_info dump.json")
    if not isinstance(meta, dict) or not isinstance(meta.get("data"), dict):
        raise ParseError(f"{dump_json}: no 'data' object; expected a dump.json written by msprobe dump.")
    data = meta["data"]
    cases = []
    for entry_name, record in data.items():
        parsed = parse_name(entry_name)
        if parsed is None or parsed.is_module or parsed.direction != FORWARD:
            continue
        backward = data.get(str(parsed.with_direction(BACKWARD)))
        if not isinstance(record, dict) or not (backward is None or isinstance(backward, dict)):
            raise ParseError(f"{dump_json}: entry '{entry_name}' is not a JSON object as msprobe dump writes it.")
        cases.append(ApiCase(name=parsed.call_name, prefix=parsed.prefix, api=parsed.api, forward=record,
                             backward=backward, index=len(cases)))
    return DumpInfo(task=meta.get("task", "statistics"), framework=meta.get("framework", ""),
                    tensor_dir=_tensor_dir(dump_json, meta), cases=cases)


def filter_by_lists(cases, white_list=(), black_list=()):
    """(kept, skipped): white_list keeps only the named APIs, black_list drops them ('linear', 'add_')."""
    kept, skipped = [], []
    white, black = set(white_list or ()), set(black_list or ())
    for case in cases:
        blocked = (white and case.api not in white) or case.api in black
        (skipped if blocked else kept).append(case)
    return kept, skipped


def _structure_key(case):
    """The forward record without statistics and file names: equal keys = same API, same structure."""
    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in STAT_KEYS}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node
    return f"{case.prefix}.{case.api}", json.dumps(strip(case.forward), sort_keys=True)


def drop_repeated_cases(cases):
    """`-f/--filter_api`: keep the first call of every API whose arguments differ only in statistics."""
    seen, kept = set(), []
    for case in cases:
        key = _structure_key(case)
        if key not in seen:
            seen.add(key)
            kept.append(case)
    return kept
