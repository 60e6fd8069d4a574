"""What config_check needs of a framework: facts, parameters as numpy, where batches come from, random APIs."""
from typing import Any, Dict, Iterable, List, Optional, Protocol, Tuple

import numpy as np

__all__ = ["ConfigCheckProbe", "PatchPoint"]

#: (owner object, attribute name, label shown in the report)
PatchPoint = Tuple[Any, str, str]


class ConfigCheckProbe(Protocol):
    name: str

    def facts(self) -> Dict[str, Any]:
        """Framework and device facts: versions, device kind and count, determinism switches, threads."""

    def named_parameters(self, model: Any) -> Iterable[Tuple[str, Any]]:
        """(name, tensor) of every parameter of `model`."""

    def to_numpy(self, value: Any) -> Optional[np.ndarray]:
        """The tensor's values on the host (bfloat16 widened exactly), or None when `value` is not a tensor."""

    def batch_sources(self) -> List[PatchPoint]:
        """Methods that return an iterator over training batches (a data loader's __iter__)."""

    def seed_apis(self) -> List[PatchPoint]:
        """Functions that seed a random generator."""

    def random_apis(self) -> List[PatchPoint]:
        """Functions that draw from a random generator."""

    def rng_states(self) -> Dict[str, bytes]:
        """The framework's random generator states, as bytes to fingerprint."""
