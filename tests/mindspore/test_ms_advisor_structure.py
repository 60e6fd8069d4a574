"""A differing argument is a finding of its own in MindSpore too (issue 40, finding 8): a PyNative net whose
activation is ops.gelu with approximate='tanh' on the NPU side and 'none' on the bench side; every value
stays within tolerance, the advisor and the terminal summary name the argument."""
import os

import numpy as np

from ms_test_helpers import fixed_input, write_config


def _net(approximate):
    from mindspore import Tensor, mint, nn, ops

    class Mlp(nn.Cell):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(7)
            self.fc1, self.fc2 = mint.nn.Linear(8, 16), mint.nn.Linear(16, 8)
            for layer in (self.fc1, self.fc2):
                layer.weight.set_data(Tensor((0.3 * rng.standard_normal(layer.weight.shape)).astype(np.float32)))
                layer.bias.set_data(Tensor(np.zeros(layer.bias.shape, np.float32)))

        def construct(self, x):
            return self.fc2(ops.gelu(self.fc1(x), approximate=approximate))
    return Mlp()


def _dump(ms, directory, net, scale=1.0):
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger

    os.makedirs(directory, exist_ok=True)
    path, dump_path = write_config(directory, task="statistics", level="mix")
    debugger = PrecisionDebugger(config_path=path)
    grad_fn = ms.value_and_grad(lambda x: mint.mean(mint.square(net(x))), None, net.trainable_params())
    debugger.start(net)
    grad_fn(Tensor(fixed_input((4, 8), 3) * np.float32(scale)))
    debugger.stop()
    debugger.step()
    debugger.close()
    return os.path.join(dump_path, "step0", "rank", "dump.json")


def test_gelu_approximate_argument_is_the_suspect(ms, tmp_path):
    from msprobe.core.compare import CompareOptions, compare_tables
    from msprobe.core.compare.advisor import advisor_text
    from msprobe.core.io.load import load_dump
    from msprobe.core.compare.render import summary_text

    npu = _dump(ms, tmp_path / "npu", _net("tanh"))
    bench = _dump(ms, tmp_path / "bench", _net("none"))
    records = compare_tables(load_dump(npu), load_dump(bench), CompareOptions(progress=False))
    suspect = records.suspect
    text = advisor_text(records)
    # fp32 on both sides: the tanh approximation's output is beyond fp32 tolerance, so the call is the
    # cause and the argument is named with it
    assert suspect is not None and suspect.entry.startswith("Functional.gelu.") and suspect.kind == "cause", text
    arguments = [records.names[r] for r in suspect.differing_arguments]
    assert arguments == [suspect.entry + ".input.approximate"], text
    assert "differing argument(s): input.approximate" in text.splitlines()[2] and "tanh" in text
    assert "1 calls with differing arguments" in summary_text(records)


def test_gelu_approximate_argument_within_tolerance_is_still_the_suspect(ms, tmp_path):
    """Inputs of 1e-3: both gelus agree within fp32 rounding, the argument alone is the finding."""
    from msprobe.core.compare import CompareOptions, compare_tables
    from msprobe.core.compare.advisor import advisor_text
    from msprobe.core.io.load import load_dump
    from msprobe.core.compare.render import summary_text

    npu = _dump(ms, tmp_path / "npu", _net("tanh"), 1e-3)
    bench = _dump(ms, tmp_path / "bench", _net("none"), 1e-3)
    records = compare_tables(load_dump(npu), load_dump(bench), CompareOptions(progress=False))
    assert not records.judgement.suspicious.any()
    suspect = records.suspect
    assert suspect is not None and suspect.kind == "argument", advisor_text(records)
    assert suspect.name.startswith("Functional.gelu.") and suspect.name.endswith(".forward.input.approximate")
    assert "input.approximate is tanh on the NPU side, none on the bench side" in advisor_text(records).splitlines()[2]
    assert "0 beyond dtype tolerance" in summary_text(records) and "1 calls with differing arguments" in summary_text(records)


def test_the_same_net_on_both_sides_has_no_suspect(ms, tmp_path):
    from msprobe.core.compare import CompareOptions, compare_tables
    from msprobe.core.io.load import load_dump

    npu = _dump(ms, tmp_path / "npu", _net("tanh"))
    bench = _dump(ms, tmp_path / "bench", _net("tanh"))
    records = compare_tables(load_dump(npu), load_dump(bench), CompareOptions(progress=False))
    assert records.suspect is None, records.suspect.summary
