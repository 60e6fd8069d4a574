"""A small training run for the online run_ut tests: `python online_run_ut_train.py CONFIG|none STEPS`.

Prints one JSON line {"losses": [...], "reference": [...]}: the losses (float hex) of STEPS steps with
PrecisionDebugger(CONFIG), and of the same steps without msprobe (fresh model, same seed) run first in
the same process, so bit-identity is checked on the same thread settings.
"""
import json
import sys

import torch
import torch.nn.functional as F


class MixedNet(torch.nn.Module):
    """linear, gelu, layer_norm, a matmul with a transposed (non-contiguous) weight view, a bfloat16 tanh,
    an in-place mul_, softmax, an integer argmax and cross_entropy."""

    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Parameter(torch.randn(5, 16) * 0.3)

    def forward(self, x):
        h = F.gelu(self.l1(x))
        h = self.norm(h)
        h = h + torch.tanh(h.to(torch.bfloat16)).float()
        h = h.mul_(0.5)
        logits = torch.matmul(h, self.head.t())
        torch.argmax(torch.softmax(logits, dim=-1), dim=-1)
        return logits


def train(steps, debugger=None):
    torch.manual_seed(0)
    model = MixedNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.randn(6, 8)
    target = torch.arange(6) % 5
    losses = []
    for _ in range(steps):
        if debugger:
            debugger.start()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        if debugger:
            debugger.stop()
        optimizer.step()
        optimizer.zero_grad()
        if debugger:
            debugger.step()
        losses.append(loss.item().hex())
    return losses


if __name__ == "__main__":
    config, steps = sys.argv[1], int(sys.argv[2])
    reference = train(steps)
    debugger = None
    if config != "none":
        from msprobe.pytorch import PrecisionDebugger
        debugger = PrecisionDebugger(config)
    # one write with its newline: print() writes the text and the newline separately, and a warning logged by
    # the sender thread in between ended up on the JSON line, which the test then could not parse
    sys.stdout.write(json.dumps({"losses": train(steps, debugger), "reference": reference}) + "\n")
    sys.stdout.flush()
