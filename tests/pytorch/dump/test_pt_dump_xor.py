"""summary_mode "xor" in PyTorch dumps: the fingerprint of every input, output, parameter and gradient."""
import copy
import json

import numpy as np
import torch

from msprobe.pytorch import PrecisionDebugger
from msprobe.pytorch.dump import adapter as torch_adapter
from msprobe.pytorch.dump.adapter import TorchAdapter, device_fingerprint
from msprobe.core.dump.stats import fingerprint_pair, format_fingerprint
from tests.core.dump.test_fingerprint import python_fingerprint
from tests.pytorch.dump.pt_dump_helpers import MLP, batch_for, load_rank, run_dump, tensor_descriptors, write_config

BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def raw_bytes(tensor):
    return tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def device_path(tensor):
    """The accelerator path, run on a CPU tensor (the same torch ops a GPU would run)."""
    return TorchAdapter().resolve_fingerprints([device_fingerprint(tensor)])[0]


def test_every_bit_of_float32_bf16_fp16_changes_the_fingerprint_on_both_paths():
    adapter = TorchAdapter()
    for dtype, bits in BITS.items():
        tensor = torch.randn(5, dtype=torch.float32).to(dtype)
        base = adapter.fingerprint(tensor)
        assert base == device_path(tensor) == python_fingerprint(raw_bytes(tensor))
        width = tensor.element_size() * 8
        for position in range(tensor.numel()):
            for bit in range(width):
                flipped = tensor.clone()
                as_int = flipped.view(bits)
                as_int[position] ^= torch.tensor(1, dtype=bits) << bit if bit < width - 1 else torch.iinfo(bits).min
                host = adapter.fingerprint(flipped)
                assert host != base, (dtype, position, bit)
                assert host == device_path(flipped) == python_fingerprint(raw_bytes(flipped))


def test_device_xor_in_one_kernel_equals_the_halving_xor_and_the_reference():
    # torch.hash_tensor (one kernel on a GPU) and the halving fallback (older torch) give the same XOR
    # as the numpy reference, for word counts odd and even, 1 and large, and negative words
    generator = torch.Generator().manual_seed(5)
    for count in (1, 2, 3, 7, 8, 1023, 4096, 65537):
        words = torch.randint(-2**63, 2**63 - 1, (count,), dtype=torch.int64, generator=generator)
        expected = 0
        for word in words.tolist():
            expected ^= word & 0xFFFFFFFFFFFFFFFF
        assert torch_adapter._xor_by_halving(words).item() & 0xFFFFFFFFFFFFFFFF == expected, count
        assert torch_adapter._xor_by_hash_tensor(words).item() & 0xFFFFFFFFFFFFFFFF == expected, count
    assert torch_adapter._xor_words is torch_adapter._xor_by_hash_tensor  # the torch of the tests has it


def test_device_weights_kept_between_tensors_give_the_reference_sum(monkeypatch):
    # the odd weights are a slice of a kept tensor that grows; past _WEIGHTS_MAX words a tensor makes its own
    monkeypatch.setattr(torch_adapter, "_WEIGHTS", {})
    monkeypatch.setattr(torch_adapter, "_WEIGHTS_MAX", 4096)
    generator = torch.Generator().manual_seed(9)
    for words in (3, 1000, 5, 2049, 4096, 4097, 70000, 17):
        tensor = torch.randint(-2**63, 2**63 - 1, (words,), dtype=torch.int64, generator=generator)
        expected = format_fingerprint(*fingerprint_pair(tensor.numpy().view("<u8")))
        assert device_path(tensor) == expected, words
        assert device_path(tensor.view(torch.float32)[1:]) == format_fingerprint(*fingerprint_pair(
            np.frombuffer(tensor.numpy().tobytes()[4:] + bytes(4), dtype="<u8"))), words  # mid-word start
    assert torch_adapter._WEIGHTS[torch.device("cpu")].numel() == 4096  # grown to the cap, never past it


def test_signed_zero_nan_payload_and_views_on_both_paths():
    adapter = TorchAdapter()
    zeros = torch.tensor([0.0, -0.0])
    assert adapter.fingerprint(zeros[:1]) != adapter.fingerprint(zeros[1:])
    nans = torch.tensor([0x7FC00000, 0x7FC00001], dtype=torch.int32).view(torch.float32)
    assert adapter.fingerprint(nans[:1]) != adapter.fingerprint(nans[1:])
    matrix = torch.randn(6, 10)
    for view in (matrix.t(), matrix[:, 1::3], matrix[1:], matrix[2, 3:]):  # mid-word starts, strides
        expected = python_fingerprint(raw_bytes(view))
        assert adapter.fingerprint(view) == device_path(view) == expected
    assert adapter.fingerprint(torch.zeros(0)) == device_path(torch.zeros(3))[:0] + "0" * 32


def test_xor_dump_fingerprints_inputs_parameters_and_gradients(tmp_path):
    torch.manual_seed(0)
    model = MLP()
    twin = copy.deepcopy(model)
    x = batch_for(model, 0)
    twin(x).pow(2).mean().backward()  # the gradients, recomputed without the tool
    weight_before = python_fingerprint(raw_bytes(model.fc1.weight))
    root = run_dump(tmp_path, model, level="mix", section={"summary_mode": "xor"})
    dump = load_rank(root)[0]["data"]
    descs = tensor_descriptors(dump)
    assert descs and all(len(d["xor"]) == 32 and d["Max"] is not None for d in descs)
    assert all("md5" not in d for d in descs)
    linear = dump["Functional.linear.0.forward"]["input_args"]
    assert linear[0]["xor"] == python_fingerprint(raw_bytes(x))
    assert linear[1]["xor"] == weight_before
    grads = dump["Module.fc1.Linear.parameters_grad"]
    assert grads["weight"][0]["xor"] == python_fingerprint(raw_bytes(twin.fc1.weight.grad))
    assert grads["bias"][0]["xor"] == python_fingerprint(raw_bytes(twin.fc1.bias.grad))


def test_inputs_are_fingerprinted_before_an_in_place_call(tmp_path):
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1", {"summary_mode": "xor"}))
    x = torch.randn(4, 5)
    before = python_fingerprint(raw_bytes(x))
    debugger.start()
    x.add_(1.0)
    debugger.stop()
    debugger.step()
    debugger.close()
    dump = load_rank(tmp_path / "dump")[0]["data"]
    (name,) = [n for n in dump if "add_" in n]
    assert dump[name]["input_args"][0]["xor"] == before
    assert dump[name]["output"][0]["xor"] == python_fingerprint(raw_bytes(x))


def test_xor_dump_at_l2_fingerprints_aten_ops(tmp_path):
    torch.manual_seed(0)
    root = run_dump(tmp_path, MLP(), level="L2", section={"summary_mode": "xor"})
    dump = load_rank(root)[0]["data"]
    assert any(name.startswith("Aten.") for name in dump)
    descs = tensor_descriptors(dump)
    assert descs and all(len(d["xor"]) == 32 for d in descs)
    json.dumps(dump)


def test_a_transposed_view_and_its_memory_each_get_their_own_c_order_fingerprint(tmp_path):
    # the statistics cache is shared by every dense view of one memory (the statistics do not depend on the order
    # of the elements); the fingerprint does: a weight seen after its transpose (or before) must still get the
    # fingerprint of its own bytes, else equal tensors get different fingerprints in runs that meet them in
    # another order
    weight = torch.randn(5, 7, generator=torch.Generator().manual_seed(9))
    config = write_config(tmp_path, "statistics", "L1", {"summary_mode": "xor"})
    debugger = PrecisionDebugger(config_path=config)
    debugger.start()
    torch.mul(weight.t(), 1.0)
    torch.mul(weight, 1.0)
    torch.mul(weight.t(), 2.0)
    debugger.stop()
    debugger.step()
    debugger.close()
    data = load_rank(tmp_path / "dump")[0]["data"]
    transposed, plain = python_fingerprint(raw_bytes(weight.t())), python_fingerprint(raw_bytes(weight))
    assert transposed != plain
    assert data["Torch.mul.0.forward"]["input_args"][0]["xor"] == transposed
    assert data["Torch.mul.1.forward"]["input_args"][0]["xor"] == plain
    assert data["Torch.mul.2.forward"]["input_args"][0]["xor"] == transposed
    assert data["Tensor.t.0.forward"]["input_args"][0]["xor"] == plain
    assert data["Tensor.t.0.forward"]["output"][0]["xor"] == transposed


def test_a_view_met_by_several_calls_is_fingerprinted_once_per_step(tmp_path, monkeypatch):
    # a transposed view cannot share its memory's fingerprint; it is cached per view (memory, layout, version), so a
    # transposed weight used by several ops of a step is walked once, and each descriptor still holds its value.
    # The walks are counted through the adapter, and seen in the cache entry: the memory's own fingerprint, and the
    # view's kept under its layout
    computed, entries = [], []
    original = TorchAdapter.fingerprint

    def counting(self, tensor):
        # the transposed weight (the ops' outputs keep its layout too); without the C digest the weight's own memory
        # is fingerprinted through here as well, once a step, which is not what this counts
        if tensor.data_ptr() == weight.data_ptr() and tensor.stride() == (1, 7):
            computed.append(tensor.stride())
        return original(self, tensor)

    monkeypatch.setattr(TorchAdapter, "fingerprint", counting)
    weight = torch.randn(5, 7, generator=torch.Generator().manual_seed(10))
    debugger = PrecisionDebugger(config_path=write_config(tmp_path, "statistics", "L1", {"summary_mode": "xor"}))
    for _ in range(2):
        debugger.start()
        view = weight.t()
        torch.mul(view, 1.0)
        torch.add(view, 1.0)
        torch.sub(view, 1.0)
        records = debugger.collector.records
        entries += [entry for key, entry in records._stats_cache.items() if key[0] == weight.data_ptr() and key[2] == 35]
        debugger.stop()
        debugger.step()
    debugger.close()
    expected = python_fingerprint(raw_bytes(weight.t()))
    # once in each step: a new step forgets what the last one cached
    assert computed == [(1, 7), (1, 7)]
    own = python_fingerprint(raw_bytes(weight))  # Tensor.t's input: the memory itself, met first
    assert [(entry[2], entry[3]) for entry in entries] == [(own, {((7, 5), (1, 7)): expected})] * 2
    assert entries[0][1] == entries[1][1] and entries[0] is not entries[1]
    for step in (0, 1):
        data = load_rank(tmp_path / "dump", step)[0]["data"]
        assert [data[name]["input_args"][0]["xor"] for name in
                ("Torch.mul.0.forward", "Torch.add.0.forward", "Torch.sub.0.forward")] == [expected] * 3
