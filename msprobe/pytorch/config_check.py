"""PyTorch side of config_check: facts, parameters, DataLoader batches and the random APIs to record."""
import os
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

__all__ = ["TorchConfigCheckProbe"]


class TorchConfigCheckProbe:
    name = "pytorch"

    def facts(self) -> Dict[str, Any]:
        import torch

        facts: Dict[str, Any] = {
            "framework": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "default_dtype": str(torch.get_default_dtype()),
            "cuda_available": torch.cuda.is_available(), "cuda_version": torch.version.cuda,
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "cpu_count": os.cpu_count(),
        }
        if torch.cuda.is_available():
            facts["devices"] = [torch.cuda.get_device_name(n) for n in range(torch.cuda.device_count())]
        npu = getattr(torch, "npu", None)
        if npu is not None and hasattr(npu, "is_available") and npu.is_available():
            facts["npu_count"] = npu.device_count()
        return facts

    def named_parameters(self, model: Any) -> Iterable[Tuple[str, Any]]:
        return model.named_parameters()

    def to_numpy(self, value: Any) -> Optional[np.ndarray]:
        import torch

        if not isinstance(value, torch.Tensor):
            return None
        value = value.detach()
        if value.dtype == torch.bfloat16:
            value = value.float()  # exact: every bfloat16 is a float32
        return value.cpu().numpy()

    def batch_sources(self) -> List[Tuple[Any, str, str]]:
        import torch.utils.data

        return [(torch.utils.data.DataLoader, "__iter__", "DataLoader")]

    def seed_apis(self) -> List[Tuple[Any, str, str]]:
        import torch

        return [(torch, "manual_seed", "torch.manual_seed"), (torch, "seed", "torch.seed"),
                (torch.cuda, "manual_seed", "torch.cuda.manual_seed"),
                (torch.cuda, "manual_seed_all", "torch.cuda.manual_seed_all")]

    def random_apis(self) -> List[Tuple[Any, str, str]]:
        import torch
        import torch.nn.functional as F

        points = [(torch, name, f"torch.{name}") for name in ("rand", "randn", "randint", "randperm", "normal",
                                                               "bernoulli", "multinomial", "rand_like", "randn_like")]
        return points + [(F, "dropout", "torch.nn.functional.dropout")]

    def rng_states(self) -> Dict[str, bytes]:
        import torch

        states = {"torch": torch.get_rng_state().numpy().tobytes()}
        if torch.cuda.is_available():
            states["cuda"] = b"".join(s.numpy().tobytes() for s in torch.cuda.get_rng_state_all())
        return states
