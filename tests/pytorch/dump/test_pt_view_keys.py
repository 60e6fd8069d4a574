"""Content keys of torch views: what views of one memory share in a step (statistics, fingerprint, CRC) and what not."""
import random
import zlib

import torch

from msprobe.core.dump.adapter import ViewKey
from msprobe.core.dump.record import RecordBuilder
from msprobe.pytorch.dump.adapter import TorchAdapter
from tests.core.dump.test_fingerprint import python_fingerprint

ADAPTER = TorchAdapter()


def _values(view):
    """The view's values as a fresh contiguous tensor (negative and conjugate bits applied): what it reads as."""
    return view.detach().resolve_neg().resolve_conj().contiguous().clone()


def _expected(view):
    """Statistics, fingerprint and CRC of the view's values, from a fresh copy (no cache, no shared memory)."""
    values = _values(view)
    raw = values.reshape(-1).view(torch.uint8).numpy().tobytes()
    data = values.abs() if values.is_complex() else values
    stats = (data.max().item(), data.min().item(), data.mean().item(), torch.linalg.vector_norm(data).item())
    return stats, python_fingerprint(raw), f"{zlib.crc32(raw) & 0xFFFFFFFF:08x}"


def _views(base):
    # small integers: every sum is exact, so statistics reduced in memory order equal those of the C-order copy
    return [base, base.t(), base.reshape(4, 6), base[1:], base[:, 2:], base.t()[1:], torch._neg_view(base),
            torch._neg_view(base).t(), torch._neg_view(base)[:, 1:], base.view(-1)]


def _described(builder, view):
    desc = builder.describe_tensor(view)
    return (desc["Max"], desc["Min"], desc["Mean"], desc["Norm"]), desc


def test_content_keys_are_equal_for_the_views_that_hold_the_memorys_values():
    base = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    key = ADAPTER.content_identity(base)
    transposed = ADAPTER.content_identity(base.t())
    assert type(key) is tuple and ADAPTER.content_identity(base.reshape(4, 6)) == key
    # the same elements in another order: the same statistics (an equal key), but bytes of its own (a ViewKey)
    assert type(transposed) is ViewKey and transposed == key and hash(transposed) == hash(key)
    assert ADAPTER.content_identity(base.t()).layout == transposed.layout  # equal layouts: equal bytes
    cube = torch.arange(24.0).reshape(2, 3, 4)
    first, second = ADAPTER.content_identity(cube.permute(2, 0, 1)), ADAPTER.content_identity(cube.permute(1, 2, 0))
    assert first == second and first.layout != second.layout  # other orders of the elements: other bytes
    assert ADAPTER.tensor_facts(base.t())[4] == transposed and type(ADAPTER.tensor_facts(base.t())[4]) is ViewKey
    # other values than the memory's: keys of their own
    assert ADAPTER.content_identity(base[1:]) != key
    for negated in (torch._neg_view(base), torch._neg_view(base).t()):
        assert negated.is_neg() and ADAPTER.content_identity(negated) != key
        assert ADAPTER.tensor_facts(negated)[4] != key
    complex_base = torch.complex(base, base + 1)
    conjugate = complex_base.conj()
    assert conjugate.is_conj() and conjugate.is_contiguous()
    assert ADAPTER.tensor_facts(conjugate)[4] != ADAPTER.tensor_facts(complex_base)[4]


def test_a_negative_view_and_its_memory_each_get_their_own_statistics_in_either_order():
    # torch._neg_view (and x.conj().imag) makes a view that stores the memory's values and reads them negated: its
    # statistics are not its memory's, whichever of the two a step meets first
    for mode in ("statistics", "xor", "md5"):
        for negated_first in (False, True):
            base = torch.tensor([[1.0, -2.0], [3.0, 0.5]])
            negated = torch._neg_view(base)
            builder = RecordBuilder(ADAPTER, summary_mode=mode)
            order = [negated, base] if negated_first else [base, negated]
            for view in order + order:
                stats, desc = _described(builder, view)
                expected = _expected(view)
                assert stats == expected[0], (mode, negated_first)
                if mode == "xor":
                    assert desc["xor"] == expected[1]
                if mode == "md5":
                    assert desc["md5"] == expected[2]
            assert _described(builder, negated)[0][:3] == (2.0, -3.0, -0.625)


def test_conjugate_views_are_fingerprinted_and_crcd_by_their_values():
    # nine elements: the conjugate flips the top bit of each 64-bit word, which the fingerprint sees only as a parity
    base = torch.complex(torch.arange(9.0), -torch.arange(9.0) - 1).reshape(3, 3)
    for mode in ("xor", "md5"):
        builder = RecordBuilder(ADAPTER, summary_mode=mode)
        for view in (base, base.conj(), base, base.conj(), base.conj().t()):
            digest = builder.describe_tensor(view)[mode]
            assert digest == _expected(view)[1 if mode == "xor" else 2]
    assert _expected(base.conj())[1] != _expected(base)[1]


def test_every_view_gets_the_digests_of_its_values_whatever_order_a_step_meets_them_in():
    base = torch.arange(24, dtype=torch.float32).reshape(6, 4) - 11.0
    expected = [_expected(view) for view in _views(base)]
    shuffle = random.Random(23)
    for mode in ("xor", "md5", "statistics"):
        for _ in range(12):
            order = list(range(len(expected)))
            shuffle.shuffle(order)
            builder = RecordBuilder(ADAPTER, summary_mode=mode)
            views = _views(base)  # new view objects each round: only the keys tie them to the memory
            for index in order + order:
                stats, desc = _described(builder, views[index])
                assert stats == expected[index][0], (mode, order, index)
                if mode != "statistics":
                    assert desc[mode] == expected[index][1 if mode == "xor" else 2], (mode, order, index)


def test_a_slice_met_by_several_calls_is_read_once_for_its_crc(monkeypatch):
    # a slice's key names its memory, layout and version: its bytes, so the CRC is shared by every call meeting it
    computed = []
    original = TorchAdapter.crc32

    def counting(self, tensor):
        computed.append(tensor.stride())
        return original(self, tensor)

    monkeypatch.setattr(TorchAdapter, "crc32", counting)
    base = torch.randn(6, 5, generator=torch.Generator().manual_seed(4))
    builder = RecordBuilder(ADAPTER, summary_mode="md5")
    crcs = [builder.describe_tensor(base[:, 1:])["md5"] for _ in range(3)]
    assert crcs == [_expected(base[:, 1:])[2]] * 3
    assert computed == [(5, 1)]


def test_forget_drops_what_was_cached_for_slices_of_the_changed_memory():
    # a collective writes a buffer without bumping its version; the slices of that buffer a step met have keys of
    # their own, and must be read again too
    for mode in ("statistics", "xor", "md5"):
        base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        part = base[:, 1:]
        builder = RecordBuilder(ADAPTER, summary_mode=mode)
        builder.describe_tensor(base)
        builder.describe_tensor(part)
        builder.describe_tensor(base.t())
        with torch.no_grad():
            base.data.mul_(-2.0)  # through .data: no version bump
        builder.forget(base)
        for view in (part, base.t(), base):
            stats, desc = _described(builder, view)
            expected = _expected(view)
            assert stats == expected[0], mode
            if mode != "statistics":
                assert desc[mode] == expected[1 if mode == "xor" else 2], mode


def test_a_0d_tensor_and_a_1_element_view_of_it_keep_their_own_statistics():
    # the reference gives a 0-d tensor its value for all four statistics (Norm -2.0 here); a 1-element view of the
    # same memory is a vector (Norm 2.0): they must not share a cache entry, whichever comes first
    for scalar_first in (True, False):
        scalar = torch.tensor(-2.0)
        vector = scalar.view(1)
        builder = RecordBuilder(ADAPTER)
        order = [scalar, vector] if scalar_first else [vector, scalar]
        norms = [_described(builder, view)[0][3] for view in order + order]
        assert norms == ([-2.0, 2.0] if scalar_first else [2.0, -2.0]) * 2
