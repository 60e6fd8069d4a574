"""Determinism debugging in MindSpore (PyNative, CPU): the first divergence of two training steps named, and its
origin re-run in-process on the saved inputs and classified (msprobe.mindspore.determinism)."""
import functools
import os

import numpy as np
import pytest

from ms_test_helpers import fixed_input, load_dump, write_config
from msprobe.core.compare.first_divergence import find_first_divergence
from msprobe.core.compare.rerun import DETERMINISTIC_DIFFERENT, NON_DETERMINISTIC, REPRODUCES_BASELINE
from msprobe.core.errors import MsprobeError
from tests.core.dump.test_fingerprint import python_fingerprint

SILU = "MintFunctional.silu.0.forward"


def silu_mlp():
    """mint Linear -> mint silu -> mint Linear with fixed weights (set, so both runs start bit-identical)."""
    from mindspore import Tensor, mint, nn

    class SiluMlp(nn.Cell):
        def __init__(self):
            super().__init__()
            self.up, self.down = mint.nn.Linear(8, 16), mint.nn.Linear(16, 4)

        def construct(self, x):
            return self.down(mint.nn.functional.silu(self.up(x)))

    net = SiluMlp()
    for seed, param in enumerate(net.trainable_params()):
        param.set_data(Tensor(fixed_input(param.shape, 10 + seed)))
    return net


def train_step(ms, root, task="statistics", level="L1", change=None):
    """One forward+backward of silu_mlp under the debugger (`change(net)` first); returns the dump.json path."""
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger

    net = silu_mlp()
    if change is not None:
        change(net)
    os.makedirs(root, exist_ok=True)
    section = {"summary_mode": "xor"} if task == "statistics" else {}
    path, dump_path = write_config(root, task=task, level=level, **{task: section})
    debugger = PrecisionDebugger(config_path=path)
    grad_fn = ms.value_and_grad(lambda data: mint.mean(mint.square(net(data))), None, net.trainable_params())
    debugger.start(net)
    grad_fn(Tensor(fixed_input((3, 8), 1)))
    debugger.stop()
    debugger.step()
    debugger.close()
    return os.path.join(dump_path, "step0", "rank", "dump.json")


def silu_kernel(perturb, calls):
    """mint's silu, one ulp up whenever perturb(call number) is true (a kernel made to compute differently;
    wraps keeps the module name, so the dump wraps it as MintFunctional.silu). The change is added as a
    constant, so autograd still runs through the real silu."""
    from mindspore import Tensor, mint
    original = mint.nn.functional.silu

    @functools.wraps(original)
    def silu(x, *args, **kwargs):
        calls.append(1)
        out = original(x, *args, **kwargs)
        if not perturb(len(calls)):
            return out
        values = out.asnumpy()
        return out + Tensor(np.nextafter(values, np.float32(np.inf)) - values)  # exact: the next float32 up
    return silu


def test_a_kernel_that_differs_every_time_is_named_and_deterministic_different(ms, tmp_path, monkeypatch):
    from mindspore import mint
    from msprobe.mindspore.determinism import rerun_origin
    good = train_step(ms, tmp_path / "good")
    monkeypatch.setattr(mint.nn.functional, "silu", silu_kernel(lambda n: True, []))
    bad = train_step(ms, tmp_path / "bad")
    origin = find_first_divergence(bad, good, str(tmp_path / "out"))
    assert origin["sequence_same"] and origin["call"] == SILU and origin["class"] == "origin"
    assert [o["call"] for o in origin["origins"]] == [SILU] and origin["propagated"] > 3
    tensors = train_step(ms, tmp_path / "bad_tensors", task="tensor")
    verdict = rerun_origin(tensors, SILU, good, k=3)
    assert verdict["class"] == DETERMINISTIC_DIFFERENT and verdict["distinct"] == 1
    assert verdict["baseline"] == [load_dump(os.path.dirname(os.path.dirname(os.path.dirname(good))))[0]
                                   ["data"][SILU]["output"][0]["xor"]]
    saved = np.load(os.path.join(os.path.dirname(tensors), "dump_tensor_data", f"{SILU}.output.0.npy"))
    assert verdict["reruns"] == [[python_fingerprint(saved.tobytes())]] * 3 and verdict["matches_observed"] == 3


def test_a_kernel_that_differs_now_and_then_is_non_deterministic(ms, tmp_path, monkeypatch):
    from mindspore import mint
    from msprobe.mindspore.determinism import rerun_origin
    good = train_step(ms, tmp_path / "good")
    calls = []
    monkeypatch.setattr(mint.nn.functional, "silu", silu_kernel(lambda n: n % 2 == 0, calls))
    tensors = train_step(ms, tmp_path / "bad_tensors", task="tensor")
    calls.clear()  # the re-runs are calls 1..4: the 2nd and the 4th compute differently
    verdict = rerun_origin(tensors, SILU, good, k=4)
    assert verdict["class"] == NON_DETERMINISTIC and verdict["distinct"] == 2
    assert verdict["reruns"][0] == verdict["reruns"][2] == verdict["baseline"] != verdict["reruns"][1]


def test_a_call_that_is_fine_here_reproduces_the_good_run(ms, tmp_path):
    from msprobe.mindspore.determinism import rerun_origin
    good = train_step(ms, tmp_path / "good")
    tensors = train_step(ms, tmp_path / "tensors", task="tensor")
    verdict = rerun_origin(tensors, "Primitive.dense.Dense.1.forward", good, k=3)  # the second Linear's kernel
    assert verdict["class"] == REPRODUCES_BASELINE
    assert verdict["reruns"] == [verdict["baseline"]] * 3 == [verdict["observed"]] * 3


def test_a_backward_call_is_re_run_from_its_saved_output_gradient(ms, tmp_path):
    from msprobe.mindspore.determinism import rerun_origin
    good = train_step(ms, tmp_path / "good")
    tensors = train_step(ms, tmp_path / "tensors", task="tensor")
    verdict = rerun_origin(tensors, "MintFunctional.silu.0.backward", good, k=2)
    assert verdict["class"] == REPRODUCES_BASELINE and verdict["reruns"] == [verdict["observed"]] * 2
    good_grad = load_dump(os.path.dirname(os.path.dirname(os.path.dirname(good))))[0]["data"][
        "MintFunctional.silu.0.backward"]["output"]
    assert verdict["baseline"] == [d["xor"] for d in good_grad if d] and len(verdict["baseline"]) == 1


def test_a_flipped_parameter_bit_names_the_parameter(ms, tmp_path):
    def flip(net):
        from mindspore import Tensor
        weight = net.up.weight.asnumpy().copy()
        weight.view(np.int32)[5, 3] ^= 1 << 12
        net.up.weight.set_data(Tensor(weight))
    good = train_step(ms, tmp_path / "good", level="mix")
    bad = train_step(ms, tmp_path / "bad", level="mix", change=flip)
    report = find_first_divergence(bad, good, str(tmp_path / "out"))
    assert report["class"] == "parameter" and report["call"] == "Primitive.dense.Dense.0.forward"
    assert report["why"] == "input_args.1 is parameter up.weight, which differs"
    assert [o["class"] for o in report["origins"]] == ["parameter"], report["origins"]


def test_random_apis_and_backward_calls_are_not_re_run(ms, tmp_path):
    from msprobe.mindspore.determinism import rerun_origin
    tensors = train_step(ms, tmp_path / "tensors", task="tensor")
    good = train_step(ms, tmp_path / "good")
    with pytest.raises(MsprobeError, match="not the forward or backward of an API call"):
        rerun_origin(tensors, "Cell.up.Linear.forward.0", good, k=2)
    with pytest.raises(MsprobeError, match="k must be an integer"):
        rerun_origin(tensors, SILU, good, k=1)
    from msprobe.mindspore.determinism import MindSporeCallRunner
    with pytest.raises(MsprobeError, match="random API"):
        MindSporeCallRunner().resolve("Functional", "dropout")
