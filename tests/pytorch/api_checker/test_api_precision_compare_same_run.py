"""api_precision_compare judges the NPU run against the GPU run: the same run given as both passes, and
a worse NPU still fails."""
import torch
import torch.nn.functional as F

from pt_run_ut_helpers import read_rows, report_paths, run_cli
from test_run_ut import lossy_bf16_gelu


def _bf16_rmsnorm_dump(out_dir):
    """L1 statistics dump of a bfloat16 RMSNorm -> linear -> gelu step: the backward of the broadcast
    `hidden * weight` sums over the batch in bfloat16, far from the float64 bench on every device."""
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)
    weight = (torch.rand(64) + 0.5).to(torch.bfloat16).requires_grad_()
    proj = torch.randn(32, 64).to(torch.bfloat16).requires_grad_()
    x = torch.randn(4, 16, 64).to(torch.bfloat16).requires_grad_()
    debugger = PrecisionDebugger(task="statistics", dump_path=str(out_dir), level="L1")
    debugger.start()
    hidden = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(torch.bfloat16)
    F.gelu(F.linear(hidden * weight, proj)).float().pow(2).mean().backward()
    debugger.stop()
    debugger.close()
    return str(out_dir / "step0" / "rank" / "dump.json")


def _details(dump, out_dir):
    assert run_cli("run_ut", "-api_info", dump, "-o", str(out_dir)) == 0
    return report_paths(out_dir)[1]


def _compare(npu, gpu, out_dir):
    assert run_cli("api_precision_compare", "-npu", npu, "-gpu", gpu, "-o", str(out_dir)) == 0
    [path] = [p for p in out_dir.iterdir() if p.name.startswith("api_precision_compare_details")]
    return {row["API name"]: row for row in read_rows(path)}


def test_same_run_as_npu_and_gpu_has_no_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MSPROBE_NO_PROGRESS", "1")
    details = _details(_bf16_rmsnorm_dump(tmp_path / "dump"), tmp_path / "ut")
    rows = _compare(details, details, tmp_path / "cmp")
    mul_backward = [name for name in rows if name.startswith("Tensor.__mul__") and ".backward." in name]
    assert mul_backward and any(rows[n]["比对算法"] == "绝对阈值法" for n in mul_backward)
    # run_ut itself sees the bfloat16 sums differ from the float64 bench
    assert any(float(rows[n]["相对误差错误率"] or 0) > 0 for n in mul_backward)
    bad = {name: row["Message"] for name, row in rows.items() if row["比对结果"] in ("error", "warning")}
    assert not bad


def test_worse_npu_still_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("MSPROBE_NO_PROGRESS", "1")
    dump = _bf16_rmsnorm_dump(tmp_path / "dump")
    gpu = _details(dump, tmp_path / "gpu")
    lossy_bf16_gelu(monkeypatch)
    npu = _details(dump, tmp_path / "npu")
    rows = _compare(npu, gpu, tmp_path / "cmp")
    assert rows["Functional.gelu.0.forward.output.0"]["比对结果"] == "error"
    assert rows["Functional.linear.0.forward.output.0"]["比对结果"] == "pass"
