"""Our dump of the model 1.2.1's samples were made from (samples/how_these_were_made_train.py) against
1.2.1's own dump: how many rows pair up by name, and how many paired tensors are bit-identical."""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn

from msprobe.core.compare import CompareOptions, compare_tables
from msprobe.core.io.load import load_dump

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "core", "compare"))
from compare_samples import sample_dump  # noqa: E402

# 1.2.1 writes L1 backward outputs in another order: for linear the ATen kernel's (bias, input, transposed
# weight: shapes differ, so those rows are not compared), for layer_norm without the None gradient of
# normalized_shape, so its output.2 holds the bias gradient where ours holds the weight's. docs/compare.md,
# "Interchangeability with 1.2.1".
KNOWN_1_2_1_BACKWARD_ERRORS = {"Functional.layer_norm.0.backward.output.2"}


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.act, self.l2, self.ln = nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4), nn.LayerNorm(32)

    def forward(self, x):
        return self.l2(self.ln(self.act(self.l1(x))))


def _dump_like_the_samples(out):
    from msprobe.pytorch import PrecisionDebugger, seed_all

    seed_all(1234)
    config = {"task": "tensor", "dump_path": out, "rank": [], "step": [], "level": "mix",
              "tensor": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as handle:
        json.dump(config, handle)
    model = M()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    debugger = PrecisionDebugger(config_path=os.path.join(out, "config.json"), model=model)
    for _ in range(2):
        debugger.start()
        loss = model(torch.randn(8, 16)).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        debugger.stop()
        debugger.step()
    debugger.close()
    return os.path.join(out, "step0", "rank", "dump.json")


def test_our_dump_matches_1_2_1_sample_of_the_same_model(tmp_path, capsys):
    ours = _dump_like_the_samples(str(tmp_path / "ours"))
    records = compare_tables(load_dump(ours), load_dump(sample_dump("pytorch_tensor_mix_run_a")),
                             CompareOptions(progress=False))
    matched = (records.npu_pos >= 0) & (records.bench_pos >= 0)
    tensors = matched & ~np.isnan(records.metrics["error_norm"])
    identical = tensors & (records.metrics["error_norm"] == 0)
    # bit-identical with torch's default threads; a few ulps when a test before this one changed them
    agreeing = tensors & ~records.judgement.suspicious
    different = {records.names[i] for i in np.flatnonzero(tensors & ~agreeing)}
    ours_rows = int((records.npu_pos >= 0).sum())
    with capsys.disabled():
        print(f"\n1.2.1 interchange: {int(matched.sum())} of our {ours_rows} rows pair with a 1.2.1 row by name; "
              f"{int(identical.sum())} of {int(tensors.sum())} paired tensors are bit-identical, "
              f"{int(agreeing.sum())} within fp32 tolerance; different: {sorted(different)}")
    assert different <= KNOWN_1_2_1_BACKWARD_ERRORS
    assert agreeing.sum() >= 0.95 * tensors.sum() and tensors.sum() >= 60
    assert matched.sum() >= 0.9 * ours_rows
    # the forward pass, where 1.2.1's data is right, agrees tensor for tensor
    forward = np.array([".forward." in name for name in records.names])
    assert (agreeing[tensors & forward]).all()
