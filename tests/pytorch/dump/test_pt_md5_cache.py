"""summary_mode md5: CRCs read from memory and shared by tensors of one memory are those of each tensor's bytes."""
import zlib

import torch

from msprobe.core.dump.record import RecordBuilder
from msprobe.pytorch.dump.adapter import TorchAdapter


def _crc(tensor):
    """The CRC-32 of the tensor's elements in logical order, computed independently of msprobe."""
    raw = tensor.detach().contiguous().numpy().tobytes()
    return f"{zlib.crc32(raw) & 0xFFFFFFFF:08x}"


def test_md5_of_views_of_one_memory_follows_each_views_element_order():
    builder = RecordBuilder(TorchAdapter(), summary_mode="md5")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = [base, base.t(), base.reshape(6, 4), base.view(-1), base.t().contiguous(), base[1:], base[:, 1]]
    for view in views + views:  # the second round meets every identity in the cache
        assert builder.describe_tensor(view)["md5"] == _crc(view)


def test_md5_changes_after_an_in_place_update_and_after_the_memory_is_reused():
    builder = RecordBuilder(TorchAdapter(), summary_mode="md5")
    tensor = torch.randn(8, 8)
    first = builder.describe_tensor(tensor)["md5"]
    tensor.mul_(3.0)  # version bump: a new identity
    assert builder.describe_tensor(tensor)["md5"] == _crc(tensor) != first
    with torch.no_grad():
        tensor.data.add_(1.0)  # through .data: no version bump, the caller says so (collectives do)
    builder.forget(tensor)
    assert builder.describe_tensor(tensor)["md5"] == _crc(tensor)
    for _ in range(20):  # freed and re-allocated memory (often at the same address) is read again
        fresh = torch.randn(8, 8)
        assert builder.describe_tensor(fresh)["md5"] == _crc(fresh)
        del fresh


def test_md5_of_every_dtype_and_of_non_plain_tensors_matches_their_bytes():
    adapter = TorchAdapter()
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
                  torch.int16, torch.int32, torch.int64):
        base = (torch.randn(5, 7) * 100).to(dtype)
        for view in (base, base[1:], base[:, 2], base.t(), base.reshape(-1)[3:20], base[0, 0]):
            expected = _crc(view.float().to(dtype)) if dtype is not torch.bfloat16 else _crc(view.view(torch.int16))
            assert adapter.crc32(view) == expected
    flags = torch.randn(9) > 0
    assert adapter.crc32(flags) == _crc(flags)
    assert adapter.crc32(torch.empty(0)) == "00000000"
    weights = torch.randn(3, 4, requires_grad=True)
    assert adapter.crc32(weights) == _crc(weights)


def test_md5_of_reused_memory_first_met_through_a_transposed_view_is_read_again():
    # one buffer, two allocations over it: the first (a plain tensor) dies; new bytes land at the same address
    # with the same element count and version 0; the new memory is met first through a transposed view, then
    # as a plain tensor. The CRC cached for the first allocation must not be handed to the second (small
    # transformers Llama md5 dumps differed between two identical runs this way, ~10 entries a step).
    import numpy as np
    builder = RecordBuilder(TorchAdapter(), summary_mode="md5")
    buffer = np.arange(4 * 4 * 32 * 16, dtype=np.float32).reshape(4, 4, 32, 16)
    first = torch.from_numpy(buffer)
    assert builder.describe_tensor(first)["md5"] == _crc(first)
    del first  # its storage dies: the statistics-cache entry is stale from now on
    buffer[:] = np.random.default_rng(0).standard_normal(buffer.shape, dtype=np.float32)
    second = torch.from_numpy(buffer)
    transposed = second.transpose(1, 2)  # dense in another order: a view whose bytes in C order are its own
    assert builder.describe_tensor(transposed)["md5"] == _crc(transposed)
    again = transposed.contiguous()  # a new memory (not this one)
    assert builder.describe_tensor(again)["md5"] == _crc(again)
    assert builder.describe_tensor(second)["md5"] == _crc(second)
    assert builder.describe_tensor(second.reshape(4, 4, 512))["md5"] == _crc(second)
