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
