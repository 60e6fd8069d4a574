"""merge_result: gather chosen APIs' metrics from per-rank compare reports into one workbook.

Input: a directory of `compare_result_rank{N}-rank{M}_{timestamp}.xlsx` (statistics or tensor mode) and
a YAML config:
    api:            [Distributed.all_reduce, Distributed.all_gather_into_tensor.0.forward, ...]
    compare_index:  [Max diff, L2norm diff, MeanRelativeErr]   # optional: all metrics of the mode
Output: `multi_ranks_compare_merge_{timestamp}.xlsx`, one sheet per metric, one row per NPU Name,
one column per rank; a name missing on a rank stays blank. Reports are read back with pandas.
"""
import os
import re
import time

from msprobe.core.compare.metrics import TENSOR_METRIC_TABLE
from msprobe.core.errors import CompareError, ConfigError, ParseError
from msprobe.core.io.xlsx import Sheet, write_xlsx
from msprobe.core.log import logger
from msprobe.core.paths import check_path, load_yaml, make_dir

__all__ = ["merge_results", "STATISTICS_INDEX", "TENSOR_INDEX"]

STATISTICS_INDEX = ["Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr", "MinRelativeErr",
                    "MeanRelativeErr", "NormRelativeErr"]
TENSOR_INDEX = [m.header for m in TENSOR_METRIC_TABLE]
_ALIASES = {"Norm diff": "L2norm diff"}
_RANK_FILE = re.compile(r"^compare_result(?:_step\d+)?_rank(\d+)-rank\d+_\d+\.xlsx$")


def _read_config(path):
    config = load_yaml(check_path(path, kind="file", what="-config"), what="merge_result config")
    if not isinstance(config, dict) or not config.get("api"):
        raise ConfigError(f"merge_result config '{path}' must list the APIs to merge under 'api:'.")
    apis = config["api"]
    if not isinstance(apis, list) or not all(isinstance(a, str) for a in apis):
        raise ConfigError("merge_result config: 'api' must be a list of names like Distributed.all_reduce.")
    indices = config.get("compare_index") or []
    if not isinstance(indices, list):
        raise ConfigError("merge_result config: 'compare_index' must be a list of metric names.")
    return apis, [_ALIASES.get(str(i), str(i)) for i in indices]


def _rank_files(input_dir):
    found = {}
    for name in sorted(os.listdir(input_dir)):
        match = _RANK_FILE.match(name)
        if match:
            rank = int(match.group(1))
            if rank in found:
                logger.warning("'%s' holds several results of rank%d; merging '%s', ignoring '%s'.", input_dir,
                               rank, os.path.basename(found[rank]), name)
                continue
            found[rank] = os.path.join(input_dir, name)
    if not found:
        raise CompareError(f"no compare_result_rank*-rank*_*.xlsx files in '{input_dir}'; run a multi-rank "
                           "compare into that directory first.")
    return dict(sorted(found.items()))


def _read_sheet(path):
    """The report's first sheet as a DataFrame of objects; text markers ('N/A', 'None') stay text and
    empty cells are None."""
    import pandas as pd

    try:
        frame = pd.read_excel(path, sheet_name=0, engine="openpyxl", dtype=object, keep_default_na=False,
                              na_values=[])
    except Exception as exc:  # zip or XML damage
        raise ParseError(f"cannot read compare result '{path}': {exc}") from None
    return frame.astype(object).where(frame.notna() & (frame != ""), None)


def _cells(series):
    """Plain Python cells of a column (None where the rank has no such row)."""
    return [None if value is None or value != value else value for value in series.tolist()]


def _selected(name, apis):
    return isinstance(name, str) and any(name == api or name.startswith(api + ".") for api in apis)


def merge_results(input_dir, output_dir, config_path):
    """Write multi_ranks_compare_merge_{timestamp}.xlsx and return its path."""
    input_dir = check_path(input_dir, kind="dir", what="-i")
    output_dir = make_dir(output_dir, what="-o")
    apis, indices = _read_config(config_path)
    per_rank, mode_indices = {}, None
    for rank, path in _rank_files(input_dir).items():
        frame = _read_sheet(path)
        if "NPU MD5" in frame.columns:
            raise CompareError(f"'{path}' is an md5-mode result; merge_result supports tensor and statistics results.")
        mode = TENSOR_INDEX if "Cosine" in frame.columns else STATISTICS_INDEX
        if mode_indices is not None and (mode_indices[0] in TENSOR_INDEX) != (mode is TENSOR_INDEX):
            raise CompareError("the compare results mix tensor and statistics modes; merge one mode at a time.")
        # reports of 1.2.1 (or older msprobe) lack the metric columns added since: merge what all of them have
        available = [i for i in mode if i in frame.columns and (mode_indices is None or i in mode_indices)]
        mode_indices = available
        missing = [column for column in ["NPU Name", *available] if column not in frame.columns]
        if not available:  # no metric at all: not a compare report
            missing.append(mode[0])
        if missing:
            raise ParseError(f"compare result '{path}' has no column {', '.join(map(repr, missing))}; is it an "
                             "xlsx written by msprobe compare?")
        chosen = frame[frame["NPU Name"].map(lambda name: _selected(name, apis))]
        per_rank[rank] = chosen.drop_duplicates("NPU Name").set_index("NPU Name")[available]
    wanted = indices or mode_indices
    unknown = [i for i in wanted if i not in mode_indices]
    if unknown:
        raise ConfigError(f"compare_index {unknown} not available in these results; choose from {mode_indices}.")
    names = list(dict.fromkeys(n for rows in per_rank.values() for n in rows.index))
    if not names:
        logger.warning("none of the APIs %s appear in the compare results of '%s'.", apis, input_dir)
    ranks = list(per_rank)
    sheets = []
    for index in wanted:
        columns = [names] + [_cells(per_rank[r][index].reindex(names)) for r in ranks]
        sheets.append(Sheet(index, ["NPU Name"] + [f"rank{r}" for r in ranks], columns))
    path = os.path.join(output_dir, f"multi_ranks_compare_merge_{time.strftime('%Y%m%d%H%M%S')}.xlsx")
    write_xlsx(path, sheets)
    logger.info("merged %d names x %d ranks x %d metrics -> %s", len(names), len(ranks), len(wanted), path)
    return path
