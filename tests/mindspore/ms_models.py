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
