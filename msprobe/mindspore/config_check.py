"""MindSpore side of config_check: facts, parameters, dataset batches and the random APIs to record."""
import os
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

__all__ = ["MindSporeConfigCheckProbe"]


class MindSporeConfigCheckProbe:
    name = "mindspore"

    def facts(self) -> Dict[str, Any]:
        import mindspore as ms

        facts: Dict[str, Any] = {"framework": "mindspore", "mindspore": ms.__version__, "cpu_count": os.cpu_count()}
        for key in ("device_target", "mode", "deterministic", "jit_level"):
            try:
                facts[key] = ms.get_context(key)
            except (ValueError, RuntimeError, TypeError):
                continue
        return facts

    def named_parameters(self, model: Any) -> Iterable[Tuple[str, Any]]:
        return ((param.name, param) for param in model.get_parameters())

    def to_numpy(self, value: Any) -> Optional[np.ndarray]:
        import mindspore as ms

        if not isinstance(value, ms.Tensor):
            return None
        if value.dtype == ms.bfloat16:
            value = value.astype(ms.float32)  # exact: every bfloat16 is a float32
        return value.asnumpy()

    def batch_sources(self) -> List[Tuple[Any, str, str]]:
        from mindspore.dataset.engine.datasets import Dataset

        return [(Dataset, "create_tuple_iterator", "Dataset.create_tuple_iterator"),
                (Dataset, "create_dict_iterator", "Dataset.create_dict_iterator")]

    def seed_apis(self) -> List[Tuple[Any, str, str]]:
        import mindspore as ms

        return [(ms, "set_seed", "mindspore.set_seed")]

    def random_apis(self) -> List[Tuple[Any, str, str]]:
        from mindspore import mint, ops

        points = [(ops, name, f"ops.{name}") for name in ("uniform", "standard_normal", "randint", "randperm")
                  if hasattr(ops, name)]
        return points + [(mint, name, f"mint.{name}") for name in ("rand", "randn", "randint", "randperm")
                         if hasattr(mint, name)]

    def rng_states(self) -> Dict[str, bytes]:
        import mindspore as ms

        return {"mindspore_seed": repr(ms.get_seed()).encode()}
