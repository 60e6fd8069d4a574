"""Training under the MindSpore debugger is bit-identical to training without it, at every PyNative level
(L0, L1, mix) and task (statistics, md5, tensor), in float32 and bfloat16."""
import numpy as np
import pytest

from ms_test_helpers import load_dump, write_config

# mix runs the hooks of L0 and L1 together, so md5 / tensor / bfloat16 are checked there
CASES = [(level, "statistics", "statistics", "float32") for level in ("L0", "L1", "mix")]
CASES += [("mix", "statistics", "md5", "float32"), ("mix", "tensor", "statistics", "float32"),
          ("mix", "statistics", "statistics", "bfloat16")]


def _train(ms, dtype, debugger=None):
    from mindspore import Tensor
    from ms_models import TinyAttentionModel, train_to_bits
    net = TinyAttentionModel(dtype=getattr(ms, dtype))
    x = Tensor(np.random.RandomState(1).randn(2, 5, 16).astype(np.float32)).astype(getattr(ms, dtype))
    return train_to_bits(net, x, debugger)


@pytest.mark.parametrize("level, task, summary_mode, dtype", CASES)
def test_training_is_bit_identical_with_the_debugger(ms, tmp_path, level, task, summary_mode, dtype):
    from msprobe.mindspore import PrecisionDebugger
    plain_losses, plain_grads, plain_params = _train(ms, dtype)
    path, dump_path = write_config(tmp_path, task=task, level=level, **{task: {"summary_mode": summary_mode}})
    debugger = PrecisionDebugger(config_path=path)
    losses, grads, params = _train(ms, dtype, debugger)
    debugger.close()
    assert [loss.tobytes() for loss in losses] == [loss.tobytes() for loss in plain_losses]
    for step, (want, got) in enumerate(zip(plain_grads, grads)):
        differ = [i for i, (a, b) in enumerate(zip(want, got)) if a.tobytes() != b.tobytes()]
        assert not differ, f"step {step}: {len(differ)} of {len(want)} gradients differ"
    assert all(a.tobytes() == b.tobytes() for a, b in zip(plain_params, params))
    assert not debugger.collector.guard.failed
    data = load_dump(dump_path, step=1)[0]["data"]
    backward = [name for name in data if ".backward" in name]
    assert backward and (level == "L1" or any(name.startswith("Cell.") for name in backward))
