"""Order the anomalies of every rank by when they happened and keep the first top-k.

    python -m msprobe.core.monitor.anomaly_analyse -d $MONITOR_OUTPUT_DIR/anomaly_detected [-o OUT] [-k 8] [-s "[1,2]"]

Reads `rank*/anomaly.json` under the data path and writes `anomaly_analyse.json` (in -o, default the data path):
as in 1.2.1, a JSON object keyed by anomaly (the keys of anomaly.json, `{tag}_step_{s}_call_{id}`; a key two
ranks share gets `_rank{r}` appended) whose entries are sorted by (step, micro_step, pp_stage, vpp_stage,
call_id), so the first entry is the earliest abnormal tensor in call order.
"""
import argparse
import json
import os
import sys

from msprobe.core.errors import MsprobeError, ParseError
from msprobe.core.log import logger
from msprobe.core.monitor.files import write_bytes
from msprobe.core.paths import check_path, load_json, make_dir

__all__ = ["analyse_anomalies", "main", "OUTPUT_FILE"]

OUTPUT_FILE = "anomaly_analyse.json"
_ORDER = ("step", "micro_step", "pp_stage", "vpp_stage", "call_id")


def _step_list(text):
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        raise ParseError(f"-s/--step_list must be a JSON list such as \"[1, 2]\", got {text!r}.") from None
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ParseError(f"-s/--step_list must be a list of integers, got {text!r}.")
    return value


def _read_all(root):
    """[(key, entry)] of every rank's anomaly.json; keys unique across ranks."""
    found, seen = [], set()
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "anomaly.json")
        if name.startswith("rank") and os.path.isfile(path):
            data = load_json(path, what="anomaly file")
            for key, entry in (data.items() if isinstance(data, dict) else ()):
                if isinstance(entry, dict):
                    unique = key if key not in seen else f"{key}_{name}"
                    seen.add(unique)
                    found.append((unique, entry))
    return found


def analyse_anomalies(data_path, out_path=None, topk=8, step_list=None):
    """{anomaly key: entry} of the first `topk` anomalies of all ranks in time order (insertion order);
    also written to anomaly_analyse.json."""
    root = check_path(data_path, kind="dir", what="-d/--data_path")
    if not isinstance(topk, int) or topk < 1:
        raise ParseError(f"-k/--topk must be an integer >= 1, got {topk!r}.")
    entries = _read_all(root)
    if step_list:
        entries = [(k, e) for k, e in entries if e.get("step") in step_list]
    entries.sort(key=lambda item: tuple(item[1].get(k, 0) for k in _ORDER))
    top = dict(entries[:topk])
    out_dir = make_dir(out_path or root, what="-o/--out_path")
    output = os.path.join(out_dir, OUTPUT_FILE)
    write_bytes(output, json.dumps(top, indent=1).encode("utf-8"))
    logger.info(f"anomaly_analyse: {len(entries)} anomalies, first {len(top)} written to {output}")
    return top


def main(argv=None, prog="python -m msprobe.core.monitor.anomaly_analyse"):
    """The command line; `prog` is the name the help shows (the adapter's module path of msprobe 1.2.1)."""
    parser = argparse.ArgumentParser(prog=prog,
                                     description="Sort monitor anomalies by time and keep the first top-k.")
    parser.add_argument("-d", "--data_path", required=True, help="$MONITOR_OUTPUT_DIR/anomaly_detected")
    parser.add_argument("-o", "--out_path", default=None, help="directory for anomaly_analyse.json (default: -d)")
    parser.add_argument("-k", "--topk", type=int, default=8, help="how many anomalies to keep (default 8)")
    parser.add_argument("-s", "--step_list", default="", help='steps to analyse, e.g. "[1, 2]" (default: all)')
    args = parser.parse_args(argv)
    try:
        analyse_anomalies(args.data_path, args.out_path, args.topk, _step_list(args.step_list))
    except MsprobeError as exc:
        logger.error(str(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
