"""Small real models for the online_dispatch tests, one of them with a numerically fragile custom op."""
import torch
import torch.nn as nn


@torch.library.custom_op("msprobe_test::shift_cancel", mutates_args=())
def shift_cancel(x: torch.Tensor) -> torch.Tensor:
    """x, computed as (x + 2048) - 2048 in x's own dtype: the shift wipes out the low bits of x
    (catastrophic cancellation), so the result is exact only when the dtype has bits to spare."""
    return (x + 2048.0) - 2048.0


@shift_cancel.register_fake
def _(x):
    return torch.empty_like(x)


def _shift_cancel_backward(ctx, grad):
    return grad


torch.library.register_autograd("msprobe_test::shift_cancel", _shift_cancel_backward)


class FragileMLP(nn.Module):
    """Linear -> GELU -> shift_cancel (fragile) -> Linear."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(shift_cancel(self.act(self.fc1(x))))


class HealthyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.softmax(self.act(self.fc1(x)), dim=-1))


class NaiveSoftmaxHead(nn.Module):
    """A classifier whose softmax is written out without subtracting the max: exp overflows in fp16."""

    def __init__(self, in_features=8, out_features=4):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        logits = self.fc(x) * 8.0
        weights = logits.exp()
        return weights / weights.sum(dim=-1, keepdim=True)


class TinyBlock(nn.Module):
    """Attention, LayerNorm, dropout and an in-place ReLU: the ops a transformer step runs."""

    def __init__(self, d=16):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True, dropout=0.1)
        self.ln = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(inplace=True), nn.Dropout(0.1), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.attn(x, x, x, need_weights=False)[0]
        return self.ln(x + self.mlp(x))
