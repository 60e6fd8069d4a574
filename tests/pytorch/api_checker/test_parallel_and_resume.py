"""multi_run_ut gives run_ut's files; a run killed with SIGKILL resumes to the same files;
api_precision_compare judges two runs' details."""
import csv
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F

from pt_run_ut_helpers import file_text, read_rows, report_paths, run_cli


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("MSPROBE_NO_PROGRESS", "1")


def test_multi_run_ut_matches_run_ut(bf16_statistics_dump, long_dump, tmp_path):
    for dump in (bf16_statistics_dump, long_dump):
        single, multi = tmp_path / f"single_{len(str(dump))}", tmp_path / f"multi_{len(str(dump))}"
        assert run_cli("run_ut", "-api_info", dump, "-o", str(single)) == 0
        assert run_cli("multi_run_ut", "-api_info", dump, "-o", str(multi), "-n", "2") == 0
        for one, two in zip(report_paths(single), report_paths(multi)):
            assert file_text(one) == file_text(two)


def test_multi_run_ut_after_cuda_was_used_starts_its_workers_by_spawn(bf16_statistics_dump, tmp_path, monkeypatch):
    # a forked child cannot initialise CUDA again (every API was skipped on a GPU machine when run_ut had run
    # in-process first); with CUDA used in this process the workers are spawned, with the same results
    import multiprocessing
    from msprobe.core.run_ut import runner
    single, multi = tmp_path / "single", tmp_path / "multi"
    assert run_cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(single)) == 0
    methods = []
    real_context = multiprocessing.get_context

    def recording(method=None):
        methods.append(method)
        return real_context(method)
    monkeypatch.setattr(runner.multiprocessing, "get_context", recording)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert run_cli("multi_run_ut", "-api_info", bf16_statistics_dump, "-o", str(multi), "-n", "2") == 0
    assert methods == ["spawn"]
    for one, two in zip(report_paths(single), report_paths(multi)):
        assert file_text(one) == file_text(two)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    from msprobe.pytorch.commands.multi_run_ut import start_method
    assert start_method() == "fork"


def _data_rows(path):
    with open(path, encoding="utf-8") as handle:
        return max(0, handle.read().count("\n") - 1)


def test_resume_after_sigkill_gives_the_uninterrupted_files(long_dump, tmp_path):
    full, killed = tmp_path / "full", tmp_path / "killed"
    assert run_cli("run_ut", "-api_info", long_dump, "-o", str(full)) == 0
    full_result, full_details = report_paths(full)
    total = len(read_rows(full_result))
    assert total > 300

    env = dict(os.environ, MSPROBE_NO_PROGRESS="1")
    proc = subprocess.Popen([sys.executable, "-m", "msprobe.cli", "-f", "pytorch", "run_ut", "-api_info",
                             long_dump, "-o", str(killed)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    rows_at_kill = 0
    while time.time() < deadline and proc.poll() is None:
        paths = [p for p in (killed.glob("accuracy_checking_result_*.csv") if killed.exists() else [])]
        if paths and _data_rows(paths[0]) >= 20:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "run_ut finished before it could be killed"
    result, details = report_paths(killed)
    rows_at_kill = len(read_rows(result))
    assert 20 <= rows_at_kill < total

    assert run_cli("run_ut", "-api_info", long_dump, "-csv_path", result) == 0
    assert report_paths(killed) == (result, details)        # the same files, continued
    assert file_text(result) == file_text(full_result)
    assert file_text(details) == file_text(full_details)
    names = [row["API name"] for row in read_rows(result)]
    assert len(names) == len(set(names)) == total


def test_resume_drops_a_half_written_line_and_orphan_details(long_dump, tmp_path):
    full = tmp_path / "full"
    assert run_cli("run_ut", "-api_info", long_dump, "-o", str(full)) == 0
    full_result, full_details = report_paths(full)
    cut = tmp_path / "cut"
    cut.mkdir()
    result, details = cut / os.path.basename(full_result), cut / os.path.basename(full_details)
    result_lines = file_text(full_result).splitlines(keepends=True)
    detail_lines = file_text(full_details).splitlines(keepends=True)
    result.write_text("".join(result_lines[:11]) + result_lines[11][:7])       # 10 APIs + a torn line
    detail_lines_kept = [line for line in detail_lines[:60]]                   # details run ahead
    details.write_text("".join(detail_lines_kept) + "Torch.matmul.99.forw")
    assert run_cli("run_ut", "-api_info", long_dump, "-csv_path", str(result)) == 0
    assert file_text(result) == file_text(full_result)
    assert file_text(details) == file_text(full_details)


def test_a_dead_worker_is_an_error_and_the_run_can_be_resumed(long_dump, tmp_path, monkeypatch, capsys):
    def crash(*args, **kwargs):
        os._exit(3)   # the worker process dies without a Python exception
    with monkeypatch.context() as patch:
        patch.setattr(torch, "tanh", crash)
        assert run_cli("multi_run_ut", "-api_info", long_dump, "-o", str(tmp_path / "broken"), "-n", "2") == 1
    log = capsys.readouterr().out
    assert "[ERROR]" in log and "worker process died" in log and "-csv_path" in log
    result, details = report_paths(tmp_path / "broken")
    assert len(read_rows(result)) < 10           # Torch.tanh.0 is the second API: little was written
    assert run_cli("multi_run_ut", "-api_info", long_dump, "-csv_path", result, "-n", "2") == 0
    assert run_cli("run_ut", "-api_info", long_dump, "-o", str(tmp_path / "clean")) == 0
    for resumed, clean in zip((result, details), report_paths(tmp_path / "clean")):
        assert file_text(resumed) == file_text(clean)


def _write_details(path, rows):
    from msprobe.core.precision.columns import DETAIL_COLUMNS
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(DETAIL_COLUMNS)
        writer.writerows(rows)


def test_api_precision_compare_flags_the_api_that_got_worse(bf16_statistics_dump, tmp_path, monkeypatch):
    gpu_out, npu_out, cmp_out = tmp_path / "gpu", tmp_path / "npu", tmp_path / "cmp"
    assert run_cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(gpu_out)) == 0
    exact = F.gelu

    def gelu(input, *args, **kwargs):   # the "NPU" gelu loses precision in bfloat16
        out = exact(input, *args, **kwargs)
        return torch.round(out * 32) / 32 if input.dtype == torch.bfloat16 else out
    monkeypatch.setattr(F, "gelu", gelu)
    assert run_cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(npu_out)) == 0
    assert run_cli("api_precision_compare", "-npu", report_paths(npu_out)[1], "-gpu", report_paths(gpu_out)[1],
                   "-o", str(cmp_out)) == 0
    result_path = next(cmp_out.glob("api_precision_compare_result_*.csv"))
    details_path = next(cmp_out.glob("api_precision_compare_details_*.csv"))
    results = {row["API name"]: row for row in read_rows(result_path)}
    assert results["Functional.gelu.0"]["Forward Test Success"] == "error"
    assert results["Functional.gelu.0"]["Backward Test Success"] == "error"
    for api in ("Functional.linear.0", "Functional.layer_norm.0", "Functional.softmax.0", "Tensor.mean.0"):
        assert results[api]["Forward Test Success"] == "pass", results[api]
    details = {row["API name"]: row for row in read_rows(details_path)}
    gelu_row = details["Functional.gelu.0.forward.output.0"]
    assert gelu_row["比对算法"] == "标杆比对法" and gelu_row["比对结果"] == "error"
    assert float(gelu_row["均方根误差比值"]) > 2
    assert details["Functional.linear.0.forward.output.0"]["比对算法"] == "ULP误差比对法"
    assert details["Tensor.pow.0.forward.output.0"]["比对算法"] == "标杆比对法"


def test_api_precision_compare_rules_on_handmade_rows(tmp_path):
    npu, gpu = tmp_path / "npu.csv", tmp_path / "gpu.csv"
    blank = [""] * 17
    # name, bench dtype, device dtype, shape, then metrics; rows differ in the abs-threshold rates
    def row(name, dtype, rel_rate, status="pass"):
        cells = [name, "torch.float32", dtype, "[4]"] + blank + [status, ""]
        cells[15], cells[16], cells[17] = "0.0", str(rel_rate), "0.0"
        return cells
    _write_details(npu, [row("Tensor.add.0.forward.output.0", "torch.float16", 0.02),
                         row("Tensor.mul.0.forward.output.0", "torch.float64", 0.0),
                         row("Tensor.sub.0.forward.output.0", "torch.float16", 0.0, status="SKIP")])
    _write_details(gpu, [row("Tensor.add.0.forward.output.0", "torch.float16", 0.0),
                         row("Tensor.mul.0.forward.output.0", "torch.float64", 0.0)])
    assert run_cli("api_precision_compare", "-npu", str(npu), "-gpu", str(gpu), "-o", str(tmp_path / "o")) == 0
    results = {r["API name"]: r for r in read_rows(next((tmp_path / "o").glob("*_result_*.csv")))}
    assert results["Tensor.add.0"]["Forward Test Success"] == "error"
    assert "相对误差错误率" in results["Tensor.add.0"]["Message"]
    assert results["Tensor.mul.0"]["Forward Test Success"] == "SKIP"     # float64: not judged
    assert results["Tensor.sub.0"]["Forward Test Success"] == "SKIP"


def _summary_line(caplog, prefix):
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(prefix) and "results in" in
             r.getMessage()]
    assert len(lines) == 1, lines
    return lines[0]


def _counts(statuses):
    return ", ".join(f"{statuses.count(s)} {label}" for s, label in
                     (("pass", "pass"), ("warning", "warning"), ("error", "error"), ("SKIP", "skipped")))


def _api_verdict(row):
    cells = [row["Forward Test Success"], row["Backward Test Success"]]
    for status in ("error", "warning", "pass"):
        if status in cells:
            return status
    return "SKIP" if "SKIP" in cells else ""


def test_run_ut_and_api_precision_compare_print_their_verdict_counts(bf16_statistics_dump, tmp_path, monkeypatch,
                                                                     caplog, capsys):
    import logging
    caplog.set_level(logging.INFO, logger="msprobe")
    gpu_out, npu_out, cmp_out = tmp_path / "gpu", tmp_path / "npu", tmp_path / "cmp"
    assert run_cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(gpu_out)) == 0
    exact = F.gelu

    def gelu(input, *args, **kwargs):   # the "NPU" gelu loses precision in bfloat16
        out = exact(input, *args, **kwargs)
        return torch.round(out * 32) / 32 if input.dtype == torch.bfloat16 else out
    monkeypatch.setattr(F, "gelu", gelu)
    caplog.clear()
    assert run_cli("run_ut", "-api_info", bf16_statistics_dump, "-o", str(npu_out)) == 0
    # the counts printed are those of the result file, recounted here
    verdicts = [_api_verdict(row) for row in read_rows(report_paths(npu_out)[0])]
    line = _summary_line(caplog, "run_ut: ")
    assert f"run_ut: {len(verdicts)} APIs: {_counts(verdicts)}; results in" in line and "error" in verdicts
    # the table under it names every API that did not pass, errors first (plain ASCII: not a terminal)
    rows = read_rows(report_paths(npu_out)[0])
    failing = [row["API name"] for row in rows if _api_verdict(row) != "pass"]
    table = capsys.readouterr().out
    assert f"run_ut: {len(failing)} of {len(rows)} APIs did not pass" in table and "\x1b[" not in table
    table_rows = [line for line in table.splitlines() if line.startswith("| ") and "status" not in line]
    assert [line.split("|")[2].strip() for line in table_rows] == sorted(
        failing, key=lambda api: ("error", "warning", "SKIP").index(_api_verdict(next(r for r in rows
                                                                                      if r["API name"] == api))))
    caplog.clear()
    assert run_cli("api_precision_compare", "-npu", report_paths(npu_out)[1], "-gpu", report_paths(gpu_out)[1],
                   "-o", str(cmp_out)) == 0
    results = read_rows(next(cmp_out.glob("api_precision_compare_result_*.csv")))
    verdicts = [_api_verdict(row) for row in results]
    line = _summary_line(caplog, "api_precision_compare: ")
    assert f"api_precision_compare: {len(verdicts)} APIs: {_counts(verdicts)}" in line
    assert verdicts.count("error") == 1 and verdicts.count("pass") >= 4
    table = capsys.readouterr().out
    [error_api] = [row["API name"] for row, verdict in zip(results, verdicts) if verdict == "error"]
    assert "api_precision_compare:" in table and f"| error  | {error_api}" in table


def test_api_precision_compare_details_keep_the_chinese_columns_and_add_english(tmp_path):
    from msprobe.core.precision.columns import COMPARE_DETAIL_COLUMNS
    npu, gpu = tmp_path / "npu.csv", tmp_path / "gpu.csv"
    blank = [""] * 17

    def row(name, dtype, rel_rate):
        cells = [name, "torch.float32", dtype, "[4]"] + blank + ["pass", ""]
        cells[15], cells[16], cells[17] = "0.0", str(rel_rate), "0.0"
        return cells
    _write_details(npu, [row("Tensor.add.0.forward.output.0", "torch.float16", 0.02),
                         row("Tensor.add.1.forward.output.0", "torch.float16", 0.0)])
    _write_details(gpu, [row("Tensor.add.0.forward.output.0", "torch.float16", 0.0),
                         row("Tensor.add.1.forward.output.0", "torch.float16", 0.0)])
    assert run_cli("api_precision_compare", "-npu", str(npu), "-gpu", str(gpu), "-o", str(tmp_path / "o")) == 0
    details_path = next((tmp_path / "o").glob("*_details_*.csv"))
    with open(details_path, encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    ref_columns = COMPARE_DETAIL_COLUMNS[:COMPARE_DETAIL_COLUMNS.index("Message") + 1]
    assert header[:len(ref_columns)] == ref_columns and ref_columns[-3:] == ["比对结果", "比对算法", "Message"]
    assert header[len(ref_columns):] == ["Result", "Standard"]
    details = {r["API name"]: r for r in read_rows(details_path)}
    bad, good = details["Tensor.add.0.forward.output.0"], details["Tensor.add.1.forward.output.0"]
    assert (bad["比对结果"], bad["Result"], bad["比对算法"], bad["Standard"]) == ("error", "error", "绝对阈值法",
                                                                           "absolute threshold")
    assert bad["Message"] == "relative error rate (相对误差错误率): error"
    assert (good["Result"], good["Message"]) == ("pass", "")
