"""torch.compile backends that change one op (the graph then runs eagerly, or through Inductor), and a tiny BERT
built from a config."""
import torch
import torch.nn.functional as F

LOW_PRECISION_MODULE = "encoder.layer.0.output.dense"


def tiny_bert(dtype=torch.float32):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, hidden_act="gelu",
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return BertModel(config).to(dtype)


def example_ids():
    return torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))


def tanh_gelu(graph_module, example_inputs):
    """Every exact GELU becomes its tanh approximation."""
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target in (F.gelu, torch._C._nn.gelu):
            node.kwargs = {**node.kwargs, "approximate": "tanh"}
    graph_module.recompile()
    return graph_module.forward


def _bf16_linear(x, weight, bias=None):
    out = F.linear(x.bfloat16(), weight.bfloat16(), None if bias is None else bias.bfloat16())
    return out.to(x.dtype)


def low_precision_matmul(graph_module, example_inputs):
    """The linear of LOW_PRECISION_MODULE, the only one with a (16, 32) weight, runs in bfloat16."""
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is F.linear:
            weight = node.args[1].meta.get("example_value")
            if weight is not None and tuple(weight.shape) == (16, 32):
                node.target = _bf16_linear
    graph_module.recompile()
    return graph_module.forward


def wide_eps_layer_norm_inductor(graph_module, example_inputs):
    """Every layer_norm gets eps 0.5, then Inductor compiles the graph (C++ kernels on CPU)."""
    from torch._inductor.compile_fx import compile_fx

    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target in (F.layer_norm, torch.layer_norm):
            args = list(node.args) + [None] * (5 - len(node.args))
            args[4] = 0.5
            node.args, node.kwargs = tuple(args), {k: v for k, v in node.kwargs.items() if k != "eps"}
    graph_module.recompile()
    return compile_fx(graph_module, example_inputs)


# Whole-graph faults: FX rewrites that a compiler makes on the graph it is handed, then aot_eager (no C++ compile).
# A node's module is the innermost entry of its nn_module_stack, as Dynamo writes it ("L['self'].layers.1.mlp").


def _in_module(node, path):
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return False
    innermost = list(stack.values())[-1][0].replace("[", ".").replace("]", "").replace("'", "")
    return innermost == path or innermost.endswith("." + path)


def _aot_eager(graph_module, example_inputs):
    graph_module.recompile()
    return torch._dynamo.lookup_backend("aot_eager")(graph_module, example_inputs)


def bf16_silu(x, inplace=False):
    """SiLU with its sigmoid rounded through bfloat16."""
    return x * torch.sigmoid(x.bfloat16()).to(x.dtype)


def bf16_rsqrt(x):
    return torch.rsqrt(x.bfloat16()).to(x.dtype)


def swiglu_fusion_layer1(graph_module, example_inputs):
    """A SwiGLU fusion that rounds its sigmoid through bfloat16, where it matches: layer 1's SiLU whose input is
    the linear of its gate projection in the same graph (module by module, the two are in different graphs)."""
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is F.silu and _in_module(node, "layers.1.mlp.act_fn"):
            (source,) = node.all_input_nodes
            if source.op == "call_function" and source.target is F.linear:
                node.target = bf16_silu
    return _aot_eager(graph_module, example_inputs)


def bf16_add(a, b):
    return (a.bfloat16() + b.bfloat16()).to(a.dtype)


def residual_epilogue_layer1(graph_module, example_inputs):
    """A linear's epilogue fusion that adds the residual in bfloat16, where it matches: layer 1's residual add
    (the layer's own code) fed by the MLP's down projection (a grandchild) in the same graph."""
    import operator

    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is operator.add and _in_module(node, "layers.1"):
            if any(source.op == "call_function" and source.target is F.linear for source in node.all_input_nodes):
                node.target = bf16_add
    return _aot_eager(graph_module, example_inputs)


def bf16_silu_layer0(graph_module, example_inputs):
    """A wrong lowering of one op: layer 0's SiLU through bfloat16 wherever it is compiled."""
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is F.silu and _in_module(node, "layers.0.mlp.act_fn"):
            node.target = bf16_silu
    return _aot_eager(graph_module, example_inputs)


def bf16_rsqrt_layer1_norm(graph_module, example_inputs):
    """A dtype change of one intermediate: layer 1's RMSNorm takes its rsqrt in bfloat16."""
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is torch.rsqrt and _in_module(node, "layers.1.norm"):
            node.target = bf16_rsqrt
    return _aot_eager(graph_module, example_inputs)


class RMSNorm(torch.nn.Module):
    def __init__(self, size, eps=1e-6):
        super().__init__()
        self.weight, self.eps = torch.nn.Parameter(torch.ones(size)), eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class Mlp(torch.nn.Module):
    def __init__(self, size, inner):
        super().__init__()
        self.gate_proj, self.up_proj = torch.nn.Linear(size, inner), torch.nn.Linear(size, inner)
        self.down_proj, self.act_fn = torch.nn.Linear(inner, size), torch.nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Layer(torch.nn.Module):
    def __init__(self, size, inner):
        super().__init__()
        self.norm, self.mlp = RMSNorm(size), Mlp(size, inner)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class TinyNet(torch.nn.Module):
    """Two pre-norm SwiGLU layers, a final RMSNorm and a head: a transformer's skeleton in a few nodes."""

    def __init__(self, size=8, inner=16):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(size, inner) for _ in range(2)])
        self.norm, self.head = RMSNorm(size), torch.nn.Linear(size, 4)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def tiny_net():
    torch.manual_seed(0)
    return TinyNet()


def tiny_input():
    return torch.randn(4, 6, 8, generator=torch.Generator().manual_seed(1))
