"""A compile_check target script whose cells are its own (defined here): the CLI runs it as a script, the test
imports it as a module for the Python API, and the two must agree."""
import mindspore as ms
import numpy as np
from mindspore import nn, ops


class Attn(nn.Cell):
    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Dense(d, 3 * d)
        self.proj = nn.Dense(d, d)
        self.d = d

    def construct(self, x):
        q, k, v = ops.split(self.qkv(x), self.d, axis=-1)
        scores = ops.softmax(ops.matmul(q, k.swapaxes(-1, -2)) / (self.d ** 0.5), axis=-1)
        return self.proj(ops.matmul(scores, v))


class Block(nn.Cell):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm((d,))
        self.attn = Attn(d)
        self.fc = nn.Dense(d, d)

    def construct(self, x):
        x = x + self.attn(self.norm(x))
        return x + ops.gelu(self.fc(x))


class Tiny(nn.Cell):
    def __init__(self, d=8, n=2):
        super().__init__()
        self.blocks = nn.CellList([Block(d) for _ in range(n)])
        self.head = nn.Dense(d, 4)

    def construct(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def compile_target():
    ms.set_seed(0)
    x = ms.Tensor(np.random.RandomState(0).randn(2, 5, 8).astype(np.float32))
    return Tiny(), (x,)
