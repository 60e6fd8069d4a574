"""Smoke test of msprobe on the torch and transformers installed here: dump a small transformers model (built from
its config, no download) in two runs, one with a changed weight, compare them from the command line (26.x's form),
and run_ut on a dump. Exits non-zero on the first thing that does not hold; prints the versions and timings.

Run by .ci/smoke_versions.sh in a fresh environment per torch version; `python .ci/smoke_versions.py` works in any
environment that has msprobe, torch and transformers.
"""
import csv
import glob
import json
import os
import shutil
import sys
import tempfile
import time

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

from msprobe.cli import main
from msprobe.pytorch import PrecisionDebugger


def dump(root, changed_layer=None):
    """One training step of a 2-layer GPT-2 under the debugger (task tensor, level mix); returns the dump root."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16))
    if changed_layer is not None:
        with torch.no_grad():
            model.transformer.h[changed_layer].mlp.c_fc.weight.mul_(1.05)
    config = os.path.join(root, "config.json")
    os.makedirs(root)
    with open(config, "w") as handle:
        json.dump({"task": "tensor", "dump_path": os.path.join(root, "dump"), "level": "mix", "tensor": {}}, handle)
    debugger = PrecisionDebugger(config_path=config)
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(1))
    debugger.start(model)
    model(ids, labels=ids).loss.backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return os.path.join(root, "dump")


def check(condition, what):
    if not condition:
        print(f"SMOKE FAILED: {what}", flush=True)
        sys.exit(1)


def rows_of(report):
    import openpyxl

    sheet = openpyxl.load_workbook(report).worksheets[0]
    rows = [[cell.value for cell in row] for row in sheet.iter_rows()]
    return rows[0], rows[1:]


def main_smoke():
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, python {sys.version.split()[0]}")
    work = tempfile.mkdtemp(prefix="msprobe_smoke_")
    started = time.time()
    good, bad = dump(os.path.join(work, "good")), dump(os.path.join(work, "bad"), changed_layer=1)
    dumped = time.time()
    check(os.path.isfile(os.path.join(good, "step0", "rank", "dump.json")), "the dump wrote step0/rank/dump.json")
    out = os.path.join(work, "compare")
    check(main(["compare", "-tp", bad, "-gp", good, "-o", out]) == 0, "msprobe compare -tp -gp exits 0")
    [report] = glob.glob(os.path.join(out, "compare_result_*.xlsx"))
    header, rows = rows_of(report)
    cosine = header.index("Cosine")
    check(len(rows) > 50, f"the report has rows ({len(rows)})")
    same = [r for r in rows if ".h.0." in str(r[0]) and ".forward." in str(r[0])]
    check(same and all(r[cosine] in (1.0, "1.0") for r in same if isinstance(r[cosine], (int, float))),
          "layer h.0's forward rows are identical (cosine 1)")
    check(any(".h.1.mlp" in str(r[0]) and isinstance(r[cosine], float) and r[cosine] < 1.0 for r in rows),
          "a row of the changed layer h.1's MLP differs")
    compared = time.time()
    checked = os.path.join(work, "run_ut")
    check(main(["acc_check", "-api_info", good, "-o", checked]) == 0, "msprobe acc_check (run_ut) exits 0")
    [result] = glob.glob(os.path.join(checked, "accuracy_checking_result_*.csv"))
    with open(result, encoding="utf-8", newline="") as handle:
        results = list(csv.DictReader(handle))
    check(len(results) > 10, f"run_ut checked the dumped APIs ({len(results)})")
    passed = [r for r in results if "pass" in str(r).lower()]
    check(len(passed) >= len(results) // 2, f"most APIs pass run_ut ({len(passed)} of {len(results)})")
    done = time.time()
    shutil.rmtree(work)
    print(f"smoke ok: dump {dumped - started:.1f} s, compare {compared - dumped:.1f} s ({len(rows)} rows), run_ut "
          f"{done - compared:.1f} s ({len(results)} APIs, {len(passed)} pass)")


if __name__ == "__main__":
    main_smoke()
