"""Statistics of a CPU tensor do not depend on its layout: a sliced or broadcast view gets the statistics of
its dense copy (one kernel for every layout, not BLAS reductions for the views)."""
import torch

from msprobe.pytorch.dump.adapter import TorchAdapter


def test_a_sliced_view_and_its_dense_copy_have_the_same_statistics():
    adapter = TorchAdapter()
    torch.manual_seed(0)
    for base in (torch.randn(64, 256) * 3 + 1, torch.randn(8, 4, 64, 33)[..., :32]):
        view = base[:, :100] if base.dim() == 2 else base.transpose(1, 2)
        assert not view.is_contiguous()
        assert adapter.tensor_stats(view) == adapter.tensor_stats(view.contiguous())


def test_a_broadcast_view_has_the_statistics_of_its_copy():
    adapter = TorchAdapter()
    row = torch.randn(1, 3000, generator=torch.Generator().manual_seed(2))
    view = row.expand(7, 3000)
    assert view.stride() == (0, 1)
    assert adapter.tensor_stats(view) == adapter.tensor_stats(view.contiguous())
