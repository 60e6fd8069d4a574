"""code_mapping: link the kernels of a MindSpore graph-mode (L2) dump to the source lines that created them."""
from msprobe.mindspore.code_mapping.mapper import map_dump

__all__ = ["map_dump"]
