"""A backward entry's `output` holds the gradient the call sends to each input, not the input's total
gradient summed over all of its consumers (checked against a hand-written numpy backward)."""
import os

import numpy as np

from ms_test_helpers import fixed_input, load_dump, write_config


def _rmsnorm_dump(ms, tmp_path, c):
    """sum(x * rsqrt(mean(x * x) + eps) * c) under ms.grad at L1, tensor task; returns (data, files, x grad)."""
    from mindspore import Tensor, mint
    from msprobe.mindspore import PrecisionDebugger
    path, dump_path = write_config(tmp_path, task="tensor", level="L1")
    debugger = PrecisionDebugger(config_path=path)
    x = fixed_input((3, 4), 5)

    def f(a):
        scale = mint.rsqrt(mint.mean(a * a, -1, keepdim=True) + 1e-6)
        return mint.sum(a * scale * Tensor(c))
    debugger.start()
    grad = ms.grad(f)(Tensor(x))
    debugger.stop()
    debugger.step()
    debugger.close()
    files = os.path.join(dump_path, "step0", "rank", "dump_tensor_data")
    return load_dump(dump_path)[0]["data"], files, x, grad.asnumpy()


def test_each_use_of_an_input_gets_its_own_gradient(ms, tmp_path):
    c = fixed_input((3, 4), 6)
    data, files, x, grad = _rmsnorm_dump(ms, tmp_path, c)

    def output(name, i):
        return np.load(os.path.join(files, data[name]["output"][i]["data_name"]))
    # the numpy backward of the same function, one call at a time
    x64, c64 = x.astype(np.float64), c.astype(np.float64)
    mean = (x64 * x64).mean(-1, keepdims=True)
    scale = 1 / np.sqrt(mean + 1e-6)
    d_normed = c64                                           # Tensor.__mul__.2: normed * c
    d_x_from_normed = d_normed * scale                       # Tensor.__mul__.1: x * scale, input 0
    d_scale = (d_normed * x64).sum(-1, keepdims=True)        # Tensor.__mul__.1, input 1
    d_mean = d_scale * -0.5 * (mean + 1e-6) ** -1.5         # Mint.rsqrt, Tensor.__add__
    d_square = np.broadcast_to(d_mean / x.shape[-1], x.shape)  # Mint.mean
    d_x_from_square = d_square * x64                         # Tensor.__mul__.0: x * x, each input
    np.testing.assert_allclose(output("Tensor.__mul__.0.backward", 0), d_x_from_square, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(output("Tensor.__mul__.0.backward", 1), d_x_from_square, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(output("Tensor.__mul__.1.backward", 0), d_x_from_normed, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(output("Tensor.__mul__.1.backward", 1), d_scale, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(output("Mint.mean.0.backward", 0), d_square, rtol=1e-5, atol=1e-8)
    # the three uses of x add up to the gradient ms.grad returned
    total = output("Tensor.__mul__.0.backward", 0) + output("Tensor.__mul__.0.backward", 1) \
        + output("Tensor.__mul__.1.backward", 0)
    np.testing.assert_allclose(total, grad, rtol=1e-5, atol=1e-7)


def test_per_call_gradients_of_primitives_and_mint_linear(ms, tmp_path):
    """Primitive.dense.Dense (mint.nn.Linear) used twice on the same input: each call's backward
    `output` is W^T g of that call alone."""
    from mindspore import Tensor, mint, nn
    from msprobe.mindspore import PrecisionDebugger

    class TwoHeads(nn.Cell):
        def __init__(self):
            super().__init__()
            self.a, self.b = mint.nn.Linear(4, 3), mint.nn.Linear(4, 3)

        def construct(self, x):
            return mint.sum(self.a(x) * 2.0) + mint.sum(mint.square(self.b(x)))
    net = TwoHeads()
    path, dump_path = write_config(tmp_path, task="tensor", level="L1")
    debugger = PrecisionDebugger(config_path=path)
    x = fixed_input((2, 4), 7)
    debugger.start(net)
    ms.grad(net)(Tensor(x))
    debugger.stop()
    debugger.step()
    debugger.close()
    data = load_dump(dump_path)[0]["data"]
    files = os.path.join(dump_path, "step0", "rank", "dump_tensor_data")
    dense = sorted(n for n in data if n.startswith("Primitive.") and n.endswith(".backward"))
    assert dense == ["Primitive.dense.Dense.0.backward", "Primitive.dense.Dense.1.backward"]
    wa, wb, bb = net.a.weight.asnumpy(), net.b.weight.asnumpy(), net.b.bias.asnumpy()
    want_a = np.full((2, 3), 2.0, np.float32) @ wa
    want_b = (2 * (x @ wb.T + bb)) @ wb
    got = [np.load(os.path.join(files, data[n]["output"][0]["data_name"])) for n in dense]
    np.testing.assert_allclose(got[0], want_a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want_b, rtol=1e-5, atol=1e-6)


def test_random_and_multi_output_calls_get_their_backward(ms, tmp_path):
    """dropout is not differentiated again (another run would draw another mask): its backward has the
    output gradient and null input gradients, and the training's random stream is untouched;
    split / max, whose other outputs get no gradient, get their per-call input gradients."""
    from mindspore import Tensor, mint, ops
    from msprobe.mindspore import PrecisionDebugger
    x = fixed_input((4, 6), 8)

    def f(a):
        values, _ = mint.max(a, 1)
        first, _ = mint.split(a, 3, 1)
        return mint.sum(values) + mint.sum(first * 2) + mint.sum(ops.dropout(a, 0.5))
    ms.set_seed(3)
    plain = ms.grad(f)(Tensor(x)).asnumpy()
    path, dump_path = write_config(tmp_path, task="tensor", level="L1")
    debugger = PrecisionDebugger(config_path=path)
    ms.set_seed(3)
    debugger.start()
    dumped = ms.grad(f)(Tensor(x)).asnumpy()
    debugger.stop()
    debugger.step()
    debugger.close()
    assert plain.tobytes() == dumped.tobytes() and not debugger.collector.guard.failed
    data = load_dump(dump_path)[0]["data"]
    files = os.path.join(dump_path, "step0", "rank", "dump_tensor_data")

    def array(record):
        return np.load(os.path.join(files, record["data_name"]))
    dropout = data["Functional.dropout.0.backward"]
    np.testing.assert_array_equal(array(dropout["input"][0]), np.ones_like(x))
    assert dropout["output"] == [None, None]
    split = data["Mint.split.0.backward"]
    assert split["input"][1] is None and split["output"][1:] == [None, None]
    want = np.zeros_like(x)
    want[:, :3] = 2.0
    np.testing.assert_array_equal(array(split["output"][0]), want)
    want = np.zeros_like(x)
    want[np.arange(4), x.argmax(1)] = 1.0
    np.testing.assert_array_equal(array(data["Mint.max.0.backward"]["output"][0]), want)
