"""Small MindSpore models built only from ops that have CPU kernels in MindSpore 2.10."""
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, mint, nn, ops


class Block(nn.Cell):
    """Dense -> relu -> mint Linear, times two, plus a residual through a primitive Add."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 8)
        self.fc2 = mint.nn.Linear(8, 4)
        self.add = ops.Add()

    def construct(self, x):
        h = mint.nn.functional.relu(self.fc(x))
        return self.add(self.fc2(h) * 2, x)


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Dense(4, 1)

    def construct(self, x):
        return mint.mean(self.head(ops.tanh(self.block(x))))


class FunctionalMlp(nn.Cell):
    """Two mint linears with fixed weights; the twin of tests' PyTorch MLP for cross-framework compare."""

    def __init__(self, weights):
        super().__init__()
        w1, b1, w2, b2 = weights
        self.w1, self.b1 = Parameter(Tensor(w1), name="w1"), Parameter(Tensor(b1), name="b1")
        self.w2, self.b2 = Parameter(Tensor(w2), name="w2"), Parameter(Tensor(b2), name="b2")

    def construct(self, x):
        h = mint.nn.functional.relu(mint.nn.functional.linear(x, self.w1, self.b1))
        return mint.tanh(mint.nn.functional.linear(h, self.w2, self.b2))


class DenseMlp(nn.Cell):
    """nn.Dense layers named fc1/fc2 with given weights (Cell-level cross-framework compare)."""

    def __init__(self, weights, names=("fc1", "fc2")):
        super().__init__()
        w1, b1, w2, b2 = weights
        self.names = names
        layers = []
        for w, b in ((w1, b1), (w2, b2)):
            dense = nn.Dense(w.shape[1], w.shape[0])
            dense.weight.set_data(Tensor(w))
            dense.bias.set_data(Tensor(b))
            layers.append(dense)
        setattr(self, names[0], layers[0])
        setattr(self, names[1], layers[1])
        self.relu = nn.ReLU()

    def construct(self, x):
        return getattr(self, self.names[1])(self.relu(getattr(self, self.names[0])(x)))


def mlp_weights(seed=0):
    rng = np.random.RandomState(seed)
    return (rng.randn(8, 4).astype(np.float32) * 0.5, rng.randn(8).astype(np.float32) * 0.1,
            rng.randn(3, 8).astype(np.float32) * 0.5, rng.randn(3).astype(np.float32) * 0.1)


def train_steps(debugger, net, x, steps=1, pass_model=True, lr=0.1):
    """Run `steps` training steps under the debugger; returns [(loss, grads)] per step."""
    opt = nn.SGD(net.trainable_params(), lr)

    def loss_fn(data):
        return mint.mean(mint.square(net(data)))
    grad_fn = ms.value_and_grad(loss_fn, None, opt.parameters)
    results = []
    for _ in range(steps):
        debugger.start(net if pass_model else None)
        loss, grads = grad_fn(Tensor(x))
        opt(grads)
        debugger.stop()
        debugger.step()
        results.append((loss, grads))
    return results


class RMSNorm(nn.Cell):
    """x * rsqrt(mean(x * x) + eps) * weight, computed in float32 (as LLaMA does)."""

    def __init__(self, dim):
        super().__init__()
        self.weight = Parameter(Tensor(np.ones(dim, np.float32)), name="weight")

    def construct(self, x):
        xf = x.astype(ms.float32)
        scale = mint.rsqrt(mint.mean(xf * xf, -1, keepdim=True) + 1e-6)
        return (xf * scale * self.weight.astype(ms.float32)).astype(x.dtype)


class CastLinear(nn.Cell):
    """A linear layer holding `dtype` weights and multiplying in float32 (MindSpore's CPU MatMul has
    no bfloat16 kernel); float32 models use mint.nn.Linear itself."""

    def __init__(self, d_in, d_out, dtype):
        super().__init__()
        rng = np.random.RandomState(d_in * 31 + d_out)
        self.weight = Parameter(Tensor(rng.randn(d_out, d_in).astype(np.float32) * 0.3).astype(dtype), name="weight")
        self.bias = Parameter(Tensor(rng.randn(d_out).astype(np.float32) * 0.1).astype(dtype), name="bias")

    def construct(self, x):
        out = mint.nn.functional.linear(x.astype(ms.float32), self.weight.astype(ms.float32),
                                        self.bias.astype(ms.float32))
        return out.astype(x.dtype)


def _linear(d_in, d_out, dtype):
    return mint.nn.Linear(d_in, d_out) if dtype == ms.float32 else CastLinear(d_in, d_out, dtype)


class AttentionBlock(nn.Cell):
    """Pre-norm self-attention with a residual: the normed input feeds three projections and the
    block input two consumers, so gradients are sums whose order decides their bits."""

    def __init__(self, dim, dtype):
        super().__init__()
        self.norm = RMSNorm(dim)
        self.q, self.k, self.v, self.o = (_linear(dim, dim, dtype) for _ in range(4))

    def construct(self, x):
        h = self.norm(x)
        scores = mint.matmul(self.q(h).astype(ms.float32), self.k(h).astype(ms.float32).transpose(-1, -2))
        attn = mint.softmax(scores * 0.25, -1)
        return x + self.o(mint.matmul(attn, self.v(h).astype(ms.float32)).astype(x.dtype))


class TinyAttentionModel(nn.Cell):
    """Attention blocks and a head; `dtype` float32 or bfloat16 parameters and activations."""

    def __init__(self, dim=16, dtype=ms.float32, layers=2):
        super().__init__()
        ms.set_seed(0)
        self.layers = nn.CellList([AttentionBlock(dim, dtype) for _ in range(layers)])
        self.head = _linear(dim, 3, dtype)

    def construct(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def train_to_bits(net, x, debugger=None, steps=2, lr=0.1):
    """Train `steps` SGD steps (under `debugger` when given; the update, in float32, after stop());
    returns the losses, the gradients of every step and the final parameters as float32 numpy arrays
    (bfloat16 widens exactly). nn.SGD has no bfloat16 kernel on the CPU, hence the update by hand."""
    params = net.trainable_params()

    def loss_fn(data):
        return mint.mean(mint.square(net(data).astype(ms.float32)))
    grad_fn = ms.value_and_grad(loss_fn, None, params)
    losses, grads_per_step = [], []
    for _ in range(steps):
        if debugger is not None:
            debugger.start(net)
        loss, grads = grad_fn(x)
        if debugger is not None:
            debugger.stop()
            debugger.step()
        for param, grad in zip(params, grads):
            param.set_data((param.astype(ms.float32) - lr * grad.astype(ms.float32)).astype(param.dtype))
        losses.append(loss.asnumpy())
        grads_per_step.append([g.astype(ms.float32).asnumpy() for g in grads])
    return losses, grads_per_step, [p.astype(ms.float32).asnumpy() for p in params]
