"""free_benchmark fix mode, the perturbations themselves, and a 2-rank gloo group."""
import subprocess
import sys
import textwrap

import torch

from fb_helpers import read_rows, write_config
from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.free_benchmark.perturb import TorchFuzzOps, add_noise, bit_noise, change_value


def _factors():
    torch.manual_seed(5)
    return (1 + 0.01 * torch.rand(8, 256)).half().requires_grad_(True)


def _product_step(section, tmp_path):
    factors = _factors()
    debugger = PrecisionDebugger(config_path=write_config(str(tmp_path), section)) if section else None
    if debugger:
        debugger.start()
    product = torch.prod(factors, dim=1)
    other = torch.exp(factors).sum(dim=1)
    (product.float().sum() + other.float().sum()).backward()
    if debugger:
        debugger.stop()
        debugger.step()
    return factors, product.detach(), other.detach(), factors.grad


def test_fix_replaces_only_the_named_api_with_a_more_accurate_result(tmp_path):
    factors, plain, plain_other, plain_grad = _product_step(None, tmp_path)
    section = {"handler_type": "fix", "pert_mode": "improve_precision", "list": ["prod"]}
    fixed_factors, fixed, fixed_other, fixed_grad = _product_step(section, tmp_path)
    reference = torch.prod(factors.detach().double(), dim=1)
    plain_error = ((plain.double() - reference).abs() / reference).max().item()
    fixed_error = ((fixed.double() - reference).abs() / reference).max().item()
    assert fixed_error < plain_error / 10
    assert fixed.dtype == torch.float16
    assert torch.equal(fixed_factors.detach(), factors.detach())      # its input untouched
    assert torch.equal(fixed_other, plain_other)                       # other APIs unchanged
    assert fixed_grad is not None and torch.isfinite(fixed_grad).all()  # training goes on through it
    assert read_rows(str(tmp_path)) == []                              # fix writes no CSV


def test_fix_with_to_cpu_also_improves_the_product(tmp_path):
    factors, plain, _, _ = _product_step(None, tmp_path)
    _, fixed, _, _ = _product_step({"handler_type": "fix", "pert_mode": "to_cpu", "fuzz_device": "cpu",
                                    "list": ["prod"]}, tmp_path)
    reference = torch.prod(factors.detach().double(), dim=1)
    assert (fixed.double() - reference).abs().max() < (plain.double() - reference).abs().max() / 10


def test_add_noise_changes_every_element_in_low_precision():
    values = torch.tensor([0.0011, 0.002, 0.01, 0.5, 1.0, 100.0, -3.0, 1e-5])
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        x = values.to(dtype)
        noisy = add_noise(x)
        assert noisy.dtype == dtype
        changed = (noisy != x).tolist()
        # every element above sqrt(eps) moves (1.2.1's constant eps left fp16 |x| >= 2^-8 unchanged)
        eps = {torch.float16: 1e-6, torch.bfloat16: 1e-4, torch.float32: 1e-8}[dtype]
        assert changed == [abs(v) > eps ** 0.5 for v in x.float().tolist()]
        # by one ulp for the large ones: the next representable number up
        big = x.abs() > 0.1
        ulp = torch.finfo(dtype).eps * 2.0 ** torch.floor(torch.log2(x.float().abs()))
        assert torch.equal((noisy.float() - x.float())[big], ulp[big])


def test_bit_noise_flips_the_last_mantissa_bit_of_normal_numbers():
    x = torch.tensor([1.0, -2.5, 0.0, 1e-7], dtype=torch.float16)  # 1e-7 is subnormal in fp16
    flipped = bit_noise(x)
    bits = x.view(torch.int16) ^ flipped.view(torch.int16)
    assert bits.tolist() == [1, 1, 0, 0]


def test_change_value_swaps_first_and_last():
    assert change_value(torch.tensor([1.0, 2.0, 3.0])).tolist() == [3.0, 2.0, 1.0]
    m = torch.arange(6.0).reshape(2, 3)
    assert change_value(m).tolist() == [[5.0, 1.0, 2.0], [3.0, 4.0, 0.0]]
    assert change_value(torch.tensor(1.0)) is None


def test_improve_precision_needs_a_low_precision_input():
    assert TorchFuzzOps.perturb((torch.ones(2),), {}, "improve_precision") is None
    args, _ = TorchFuzzOps.perturb((torch.ones(2).half(), [torch.ones(1).bfloat16()]), {}, "improve_precision")
    assert args[0].dtype == torch.float32 and args[1][0].dtype == torch.float32
    args, _ = TorchFuzzOps.perturb((torch.ones(2),), {}, "improve_precision", "float64")
    assert args[0].dtype == torch.float64


WORKER = textwrap.dedent("""
    import json, os, sys
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    def worker(rank, root, port):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        torch.set_num_threads(1)
        from msprobe.pytorch import PrecisionDebugger
        cfg = os.path.join(root, "cfg.json")
        dist.init_process_group("gloo", rank=rank, world_size=2)
        debugger = PrecisionDebugger(config_path=cfg)
        torch.manual_seed(rank)
        for step in range(2):
            factors = (1 + 0.01 * torch.rand(8, 256)).half()
            debugger.start()
            product = torch.prod(factors, dim=1)
            total = product.float().sum()
            dist.all_reduce(total)          # a collective inside the window is never re-run
            debugger.stop()
            debugger.step()
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(worker, args=(sys.argv[1], int(sys.argv[2])), nprocs=2, join=True)
""")


def test_two_gloo_ranks_append_to_one_csv(tmp_path):
    write_config(str(tmp_path), {"pert_mode": "improve_precision"})
    (tmp_path / "free_benchmark.json").rename(tmp_path / "cfg.json")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    port = 31000 + (abs(hash(str(tmp_path))) % 2000)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path), str(port)], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_rows(str(tmp_path))
    assert sorted((r["rank"], r["step"], r["api_name"]) for r in rows) == [
        (rank, step, "Torch.prod.0.forward") for rank in ("0", "1") for step in ("0", "1")]
