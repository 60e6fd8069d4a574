"""`risk_level` (a key msprobe 26.x users bring): which APIs an L1/mix dump keeps when no scope or list is given.

Three classes of API, by how likely a numerical fault starts there:
  CORE   reductions over a dimension that mix many values at once: matrix products, convolutions,
         normalisations, embeddings, attention, fused optimizer steps, collectives
  LOW    calls that move or re-label values without computing new ones: views and reshapes, copies and casts,
         creation of constant tensors, joins and splits
  FOCUS  every other API (element-wise math, activations, losses, reductions ...)
risk_level "ALL" keeps every API, "FOCUS" all but LOW, "CORE" only CORE. Modules are always kept (they give the
structure the compare pairs calls in). The API is the name between the prefix and the call counter:
"Functional.linear.0" -> "linear", "Tensor.__matmul__.2" -> "__matmul__", "Distributed.all_reduce.0" -> "all_reduce".
"""
from typing import FrozenSet

__all__ = ["CORE_APIS", "LOW_APIS", "api_of", "keeps"]

_MATRIX = ("matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "mv", "addmm", "addmm_", "addbmm", "addbmm_",
           "baddbmm", "baddbmm_", "addmv", "addmv_", "addr", "linear", "bilinear", "einsum", "tensordot", "chain_matmul",
           "linalg.matmul", "linalg.multi_dot", "linalg.vecdot", "npu_linear")
_CONV = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution",
         "_convolution", "conv_tbc")
_NORM = ("layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm", "local_response_norm",
         "npu_rms_norm", "native_layer_norm", "native_batch_norm")
_ATTENTION = ("scaled_dot_product_attention", "multi_head_attention_forward", "npu_fusion_attention",
              "flash_attention", "embedding", "embedding_bag")
_OPTIMIZER = ("_fused_adam_", "_fused_adamw_", "_fused_sgd_", "_foreach_add_", "_foreach_mul_", "_foreach_addcdiv_",
              "_foreach_addcmul_", "_foreach_lerp_")
_COLLECTIVE = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "broadcast", "reduce", "all_to_all", "all_to_all_single", "_all_gather_base", "_reduce_scatter_base")
CORE_APIS: FrozenSet[str] = frozenset(_MATRIX + _CONV + _NORM + _ATTENTION + _OPTIMIZER + _COLLECTIVE)

_SHAPE = ("view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze", "expand",
          "expand_as", "permute", "transpose", "t", "movedim", "moveaxis", "swapaxes", "swapdims", "contiguous",
          "ravel", "unfold", "narrow", "as_strided", "atleast_1d", "atleast_2d", "atleast_3d", "repeat", "tile",
          "repeat_interleave", "broadcast_to")
_COPY = ("to", "float", "double", "half", "bfloat16", "int", "long", "bool", "byte", "char", "short", "type",
         "type_as", "clone", "detach", "cpu", "cuda", "npu", "numpy", "copy_", "__bool__", "stride", "size", "dim")
_CREATE = ("zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like", "full", "full_like", "arange", "range",
           "linspace", "logspace", "eye", "tensor", "as_tensor", "from_numpy", "tril", "triu", "tril_indices",
           "triu_indices", "diag", "diag_embed", "diagflat")
_JOIN = ("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack", "split",
         "split_with_sizes", "tensor_split", "chunk", "unbind", "hsplit", "vsplit", "dsplit")
LOW_APIS: FrozenSet[str] = frozenset(_SHAPE + _COPY + _CREATE + _JOIN)


def api_of(call_name: str) -> str:
    """The API of an API call's name without direction: 'Functional.linear.0' -> 'linear'."""
    body = call_name.split(".", 1)[-1]
    return body.rsplit(".", 1)[0] if "." in body else body


def keeps(risk_level: str, call_name: str) -> bool:
    """Whether an API call named `call_name` ('Prefix.api.N') is dumped at `risk_level`."""
    if risk_level == "ALL":
        return True
    api = api_of(call_name)
    if risk_level == "CORE":
        return api in CORE_APIS
    return api not in LOW_APIS
