"""Small helpers shared by the run_ut tests: run the CLI in-process, read the CSVs it wrote."""
import csv
import glob
import os

from msprobe.cli import main


def run_cli(*argv):
    return main(["-f", "pytorch", *argv])


def report_paths(out_dir):
    """(result csv, details csv) of the single run in out_dir."""
    results = glob.glob(os.path.join(str(out_dir), "accuracy_checking_result_*.csv"))
    details = glob.glob(os.path.join(str(out_dir), "accuracy_checking_details_*.csv"))
    assert len(results) == 1 and len(details) == 1, os.listdir(str(out_dir))
    return results[0], details[0]


def read_rows(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def results_by_api(out_dir):
    return {row["API name"]: row for row in read_rows(report_paths(out_dir)[0])}


def file_text(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()
