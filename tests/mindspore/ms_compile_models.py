"""A "compiler" for MindSpore compile_check tests that changes one op in one cell: the Dense with an (8, 4)
weight (Net's block.fc) multiplies in float16 inside its jit graph; every other cell is mindspore.jit."""
import mindspore as ms
from mindspore import nn, ops

LOW_PRECISION_CELL = "block.fc"


def low_precision_dense_jit(cell):
    if isinstance(cell, nn.Dense) and tuple(cell.weight.shape) == (8, 4):
        @ms.jit
        def half_dense(x):
            out = ops.matmul(x.astype(ms.float16), cell.weight.astype(ms.float16).T).astype(x.dtype)
            return out + cell.bias
        return half_dense
    return ms.jit(cell.construct)


class PidScaled(nn.Cell):
    """A construct mindspore.jit cannot parse (an import statement); PyNative runs it."""

    def construct(self, x):
        import os
        return x * float(os.getpid() > 0)


class Scaled(nn.Cell):
    """The user's own cell that mindspore.jit compiles."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 4)

    def construct(self, x):
        return self.fc(x) * 2


class NetWithUncompilableCell(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 4)
        self.own = Scaled()
        self.scaled = PidScaled()

    def construct(self, x):
        return self.scaled(self.own(self.fc(x)))


class NetCompilingNothingOwn(nn.Cell):
    """Only MindSpore's own Dense compiles; the one cell of the user's does not."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, 4)
        self.scaled = PidScaled()

    def construct(self, x):
        return self.scaled(self.fc(x))
