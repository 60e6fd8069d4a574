"""The torch-free .pt reader returns exactly what torch.load returns, for both file layouts."""
import numpy as np
import pytest
import torch

from msprobe.core.io.pt_reader import UnreadableTensorFile, read_pt

TENSORS = {
    "float32": torch.randn(3, 5),
    "bfloat16": torch.randn(4, 4, dtype=torch.bfloat16),
    "float16": torch.randn(7, dtype=torch.float16),
    "float64": torch.randn(2, 2, dtype=torch.float64),
    "int64": torch.arange(10),
    "int32": torch.arange(6, dtype=torch.int32).reshape(2, 3),
    "bool": torch.tensor([True, False, True]),
    "uint8": torch.arange(5, dtype=torch.uint8),
    "transposed": torch.randn(3, 4).t(),
    "offset_view": torch.arange(20.0)[5:11].reshape(2, 3),
    "zero_dim": torch.tensor(3.5),
    "empty": torch.zeros(0, 3),
}


@pytest.mark.parametrize("zip_format", [True, False])
@pytest.mark.parametrize("name", sorted(TENSORS))
def test_reader_matches_torch_load(tmp_path, name, zip_format):
    tensor = TENSORS[name]
    path = str(tmp_path / f"{name}.pt")
    torch.save(tensor, path, _use_new_zipfile_serialization=zip_format)
    expected = torch.load(path, weights_only=True)
    expected = expected.float() if expected.dtype == torch.bfloat16 else expected
    array = read_pt(path)
    assert array.shape == tuple(expected.shape)
    np.testing.assert_array_equal(array, expected.numpy())


def test_non_tensor_files_are_refused(tmp_path):
    path = str(tmp_path / "dict.pt")
    torch.save({"a": torch.ones(2)}, path)
    with pytest.raises(UnreadableTensorFile):
        read_pt(path)
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"not a torch file")
    with pytest.raises(UnreadableTensorFile):
        read_pt(str(broken))
