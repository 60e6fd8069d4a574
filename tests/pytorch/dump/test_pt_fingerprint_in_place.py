"""The fingerprint of a plain contiguous CPU tensor is read from its memory in place: the same value as the
definition on its bytes, for parameters, offsets into a storage, every plain dtype and empty tensors; views
whose memory is not their value (negative and conjugate bits) take the copying path."""
import torch

from msprobe.pytorch.dump.adapter import TorchAdapter
from tests.core.dump.test_fingerprint import python_fingerprint


def _bytes(tensor):
    return tensor.detach().resolve_neg().resolve_conj().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def test_in_place_fingerprints_equal_the_definition():
    adapter = TorchAdapter()
    gen = torch.Generator().manual_seed(3)
    base = torch.randn(5, 7, generator=gen)
    cases = [base, torch.nn.Parameter(base.clone()), base[2:],  # a storage offset
             base > 0, (base * 100).to(torch.int64), base.to(torch.bfloat16), base[:0], torch.tensor(2.5)]
    for tensor in cases:
        assert adapter.fingerprint(tensor) == python_fingerprint(_bytes(tensor)), tensor.dtype


def test_negative_and_conjugate_views_are_fingerprinted_by_value():
    adapter = TorchAdapter()
    real = torch.randn(4, 3, generator=torch.Generator().manual_seed(4))
    negative = torch._neg_view(real)
    assert negative.is_neg() and negative.is_contiguous()
    assert adapter.fingerprint(negative) == adapter.fingerprint(-real)
    complex_view = torch.complex(real, real + 1).conj()
    assert complex_view.is_conj()
    assert adapter.fingerprint(complex_view) == python_fingerprint(_bytes(complex_view))


def _strided_views(base):
    """Views that are not contiguous: slices, steps, transposes, permutes, broadcasts, an offset row."""
    return [base[:, 1:4], base[::2], base[..., ::3], base.transpose(0, 1), base.permute(2, 0, 1),
            base[0:1].expand(4, *base.shape[1:]), base.unsqueeze(1).expand(base.shape[0], 3, *base.shape[1:]),
            base[1, :, 2:], base.transpose(1, 2)[:, 1:]]


def test_strided_views_are_fingerprinted_in_c_order_like_their_copies():
    # a view that is not contiguous is walked in C order by the C kernel, without a framework copy: it must
    # give its dense copy's fingerprint, which is the definition on its bytes, for every plain dtype
    adapter = TorchAdapter()
    gen = torch.Generator().manual_seed(5)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.bool):
        base = (torch.randn(6, 5, 7, generator=gen) * 50).to(dtype)
        for view in _strided_views(base):
            assert not view.is_contiguous()
            expected = python_fingerprint(_bytes(view))
            assert adapter.fingerprint(view) == expected == adapter.fingerprint(view.contiguous()), (dtype, view.stride())


def test_strided_views_have_the_statistics_of_their_copies():
    # slices and broadcasts are gathered in C order by the C kernel: the same bits as the kernel on the dense copy
    # (transposes are dense in another order and read in place, in memory order); all views get Max/Min exactly
    # and Mean/Norm to float rounding of what torch computes on the view in float64
    from msprobe.pytorch.dump.adapter import _dense_order

    adapter = TorchAdapter()
    gen = torch.Generator().manual_seed(6)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        base = torch.randn(6, 5, 7, generator=gen).to(dtype)
        for view in _strided_views(base):
            stats = adapter.tensor_stats(view)
            if not _dense_order(view)[1]:
                assert stats == adapter.tensor_stats(view.contiguous()), (dtype, view.stride())
            wide = view.double()
            assert stats[:2] == (wide.max().item(), wide.min().item())
            tolerance = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
            assert abs(stats[2] - wide.mean().item()) <= tolerance * wide.abs().mean().item()
            assert abs(stats[3] - wide.norm().item()) <= tolerance * wide.norm().item()


def test_the_fused_first_sight_path_equals_the_three_adapter_methods():
    # tensor_digest reads a dense float CPU tensor's facts once for both kernels; every kind of tensor must get
    # exactly what tensor_stats, fingerprint and memory_owner give one by one
    from msprobe.core.dump.adapter import DumpAdapter

    adapter = TorchAdapter()
    gen = torch.Generator().manual_seed(8)
    base = torch.randn(6, 5, 7, generator=gen)
    cases = [base, torch.nn.Parameter(base.clone()), base[2:], base.transpose(0, 2), base[:, 1:3], base.to(torch.float64),
             base.to(torch.float16), base.to(torch.bfloat16), (base * 9).to(torch.int64), base > 0, base[:0], torch.tensor(1.5),
             torch._neg_view(base)]
    for tensor in cases:
        for want_fingerprint in (False, True):
            plain = DumpAdapter.tensor_digest(adapter, tensor, want_fingerprint, True)
            # without the content key (facts asked of torch) and with it (facts read from the key)
            for key in (None, adapter.tensor_facts(tensor)[4]):
                fused = adapter.tensor_digest(tensor, want_fingerprint, True, key)
                assert fused[:2] == plain[:2], (tensor.dtype, tensor.stride(), key)
                assert fused[2] is plain[2] is tensor.untyped_storage()
        assert adapter.tensor_digest(tensor, True, False)[2] is None
