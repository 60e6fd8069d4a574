"""Write the code mapping of an L2 dump: npy mode (`code_mapping_{ts}.csv`) or statistic mode.

npy mode: every `*.npy` under --dump_data; the kernel name is the second dot-separated field of the file
name (`MatMul.Default_fc-Dense_MatMul-op0.0.0.TS.output.0.DefaultFormat.Float32.npy`); a file that
MindSpore renamed to a number (name over 255 characters) is looked up in the `mapping.csv` beside it.
Output: OUTPUT/code_mapping_{ts}.csv with `File Path, Code Stack, Scope Name`.
statistic mode (no npy found): beside each `statistic.csv` a new `statistic_code_mapping_{ts}.csv` with
the same rows and two more columns, `Code Stack` and `Scope Name`; statistic.csv itself is left as it is.
Several matching scopes are joined with newlines; no match leaves both cells empty.
"""
import io
import os
import time
from typing import Dict, List, Tuple

from msprobe.core.csv_cells import SafeCsvWriter, read_csv_rows
from msprobe.core.errors import ParseError
from msprobe.core.log import logger
from msprobe.core.paths import atomic_write_text, check_path, make_dir
from msprobe.mindspore.code_mapping.ir_parser import parse_ir
from msprobe.mindspore.code_mapping.matcher import ScopeMatcher

__all__ = ["map_dump", "MAPPING_COLUMNS"]

MAPPING_COLUMNS = ["File Path", "Code Stack", "Scope Name"]
_STAT_OP_NAME = "Op Name"


def _files(root: str, wanted) -> List[str]:
    if os.path.isfile(root):
        return [root] if wanted(os.path.basename(root)) else []
    found = []
    for directory, _, names in os.walk(root):
        found += [os.path.join(directory, n) for n in names if wanted(n)]
    return sorted(found)


def _renamed_files(directory: str, cache: Dict[str, Dict[str, str]]) -> Dict[str, str]:
    """{'844354976.npy': original file name} from the mapping.csv MindSpore writes beside renamed files."""
    if directory not in cache:
        mapping, path = {}, os.path.join(directory, "mapping.csv")
        if os.path.isfile(path):
            mapping = {row[0]: row[1] for row in read_csv_rows(path, what="mapping.csv") if len(row) >= 2}
        cache[directory] = mapping
    return cache[directory]


def _kernel_name(path: str, cache) -> str:
    name = os.path.basename(path)
    if name.split(".")[0].isdigit():
        name = _renamed_files(os.path.dirname(path), cache).get(name, name)
    fields = name.split(".")
    return fields[1] if len(fields) > 2 else ""


def _cells(matcher: ScopeMatcher, kernel: str) -> Tuple[str, str]:
    nodes = matcher.match(kernel) if kernel else []
    return "\n".join("\n".join(n.code) for n in nodes if n.code), "\n".join(n.scope for n in nodes)


def _csv_text(header: List[str], rows) -> str:
    buffer = io.StringIO()
    writer = SafeCsvWriter(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def _new_path(directory: str, prefix: str) -> str:
    stamp = time.strftime("%Y%m%d%H%M%S")
    path, suffix = os.path.join(directory, f"{prefix}_{stamp}.csv"), 0
    while os.path.exists(path):  # never replace an earlier result
        suffix += 1
        path = os.path.join(directory, f"{prefix}_{stamp}_{suffix}.csv")
    return path


def _map_statistics(matcher: ScopeMatcher, statistic_files: List[str]) -> List[str]:
    written = []
    for path in statistic_files:
        rows = read_csv_rows(path, what="statistic.csv")
        if not rows or _STAT_OP_NAME not in rows[0]:
            logger.warning("code_mapping: %s has no '%s' column; skipped.", path, _STAT_OP_NAME)
            continue
        column = rows[0].index(_STAT_OP_NAME)
        body = [row + list(_cells(matcher, row[column] if column < len(row) else "")) for row in rows[1:]]
        target = _new_path(os.path.dirname(path), "statistic_code_mapping")
        atomic_write_text(target, _csv_text(rows[0] + ["Code Stack", "Scope Name"], body))
        written.append(target)
    return written


def map_dump(ir_path: str, dump_data: str, output_dir: str = "./") -> List[str]:
    """Map the kernels of `dump_data` (a file or a folder) to code; returns the CSV files written."""
    dump_data = check_path(dump_data, what="--dump_data", allow_symlink=True)
    matcher = ScopeMatcher(parse_ir(ir_path))
    npy_files = _files(dump_data, lambda n: n.endswith(".npy"))
    if npy_files:
        cache: Dict[str, Dict[str, str]] = {}
        rows = [[path, *_cells(matcher, _kernel_name(path, cache))] for path in npy_files]
        target = _new_path(make_dir(output_dir, what="--output"), "code_mapping")
        atomic_write_text(target, _csv_text(MAPPING_COLUMNS, rows))
        mapped = sum(1 for row in rows if row[2])
        logger.info("code_mapping: %d of %d tensor files mapped to code; written to %s", mapped, len(rows), target)
        return [target]
    statistic_files = _files(dump_data, lambda n: n == "statistic.csv")
    if not statistic_files:
        raise ParseError(f"--dump_data '{dump_data}' holds no .npy file and no statistic.csv; give an L2 dump "
                         "(task tensor or statistics) or one of its files.")
    written = _map_statistics(matcher, statistic_files)
    for path in written:
        logger.info("code_mapping: written %s", path)
    return written
