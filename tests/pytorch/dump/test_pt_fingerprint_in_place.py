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
