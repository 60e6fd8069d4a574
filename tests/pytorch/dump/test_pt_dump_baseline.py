"""Baseline mode: a run given the good run's xor dump saves real tensors only for the first calls that differ."""
import json

import torch

from tests.core.dump.test_fingerprint import python_fingerprint
from tests.pytorch.dump.pt_dump_helpers import MLP, batch_for, load_rank, run_dump


def flipped_mlp():
    torch.manual_seed(0)
    model = MLP()
    with torch.no_grad():
        model.fc2.weight.view(torch.int32)[1, 3] ^= 1 << 4
    return model


def test_only_the_first_diff_nums_differing_calls_get_their_tensors(tmp_path):
    (tmp_path / "good").mkdir()
    torch.manual_seed(0)
    good = run_dump(tmp_path / "good", MLP(), section={"summary_mode": "xor"})
    (tmp_path / "bad").mkdir()
    model = flipped_mlp()
    weight = model.fc2.weight.detach().clone()
    bad = run_dump(tmp_path / "bad", model, section={"summary_mode": "xor", "bench_path": str(good),
                                                      "diff_nums": 2})
    data, good_data = load_rank(bad)[0]["data"], load_rank(good)[0]["data"]
    assert list(data) == list(good_data)  # every call is still written, as the statistics task does
    kept = [name for name, body in data.items() if body.get("bench_differs")]
    assert kept == ["Functional.linear.1.forward", "Tensor.pow.0.forward"]  # fc2 first, then what reads it
    for name in data:  # only the kept calls have tensor files
        has_files = "data_name" in json.dumps(data[name])
        assert has_files == (name in kept)
    linear = data["Functional.linear.1.forward"]
    tensor_dir = bad / "step0" / "rank" / "dump_tensor_data"
    saved_weight = torch.load(tensor_dir / linear["input_args"][1]["data_name"], weights_only=True)
    assert torch.equal(saved_weight.view(torch.int32), weight.view(torch.int32))
    saved_out = torch.load(tensor_dir / linear["output"][0]["data_name"], weights_only=True)
    assert python_fingerprint(saved_out.numpy().tobytes()) == linear["output"][0]["xor"]
    assert linear["output"][0]["xor"] != good_data["Functional.linear.1.forward"]["output"][0]["xor"]


def test_a_run_identical_to_the_good_one_saves_no_tensor(tmp_path):
    (tmp_path / "good").mkdir()
    torch.manual_seed(0)
    good = run_dump(tmp_path / "good", MLP(), section={"summary_mode": "xor"})
    (tmp_path / "same").mkdir()
    torch.manual_seed(0)
    same = run_dump(tmp_path / "same", MLP(), section={"summary_mode": "xor", "bench_path": str(good)})
    assert "data_name" not in (same / "step0" / "rank" / "dump.json").read_text()
    assert not list((same / "step0" / "rank").glob("dump_tensor_data/*"))
    assert batch_for(MLP()).shape == (3, 4)
