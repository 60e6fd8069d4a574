"""A clean float16 MindSpore attention net against its float32 twin names no suspect (issue 20): the key
projection's bias gradient of a mint.nn.Linear (dumped as `Primitive.dense.Dense`) is zero up to
rounding (softmax ignores a constant added to every score of a row), so its relative difference is
large although every operand agrees. The cancelling-contraction rule knew only PyTorch's `linear`."""
import os

import numpy as np

from ms_test_helpers import diagnosis_nets

def test_clean_fp16_attention_net_has_no_suspect_where_a_dense_bias_gradient_cancels(ms, tmp_path):
    suite = diagnosis_nets()
    rows = suite.run_ms_pair(str(tmp_path / "pair"), "ms_attention", "clean_fp16", 0)
    assert len(rows) == 4
    assert [row["suspect"] for row in rows] == [None] * 4, rows
    # the premise, from the float32 side's own dump: layer 1's key bias gradient (Dense.5, the sixth
    # linear) is a sum over tokens that cancels to ~1e-9 of the gradient flowing into it
    raw, data_dir, _ = suite.dump_net(str(tmp_path / "fp32"), "ms_attention", "fp32", 0)
    entry = raw["data"]["Primitive.dense.Dense.5.backward"]
    bias_grad = np.load(os.path.join(data_dir, entry["output"][2]["data_name"]))
    incoming = np.load(os.path.join(data_dir, entry["input"][0]["data_name"]))
    assert bias_grad.shape == (16,)
    assert np.linalg.norm(bias_grad) < 1e-5 * np.linalg.norm(incoming)
    assert np.allclose(bias_grad, incoming.reshape(-1, 16).sum(0), atol=1e-6)
