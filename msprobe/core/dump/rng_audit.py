"""RNG audit: which dumped calls draw random numbers, so the dump can record the random state they start from.

With summary_mode "xor", the entry of every call named here gets a key "rng": the fingerprint (stats.fingerprint)
of the framework's random-number state as the call begins (the adapter's `random_state()`: torch's CPU
generator and every initialised CUDA generator; MindSpore's global generator). Two runs whose random streams
parted are then found at the first random call whose "rng" differs (compare's first divergence, class
"random"), however many calls later the outputs start to differ.

    is_random_call("Functional.dropout") -> True;  is_random_call("Aten.native_dropout.default") -> True
"""
from functools import lru_cache

from msprobe.core.naming import RANDOM_APIS as NAMING_RANDOM

__all__ = ["RANDOM_APIS", "is_random_call"]

#: API names (a part of a call's name) that draw random numbers: naming.RANDOM_APIS (run_ut's list, less the
#: uninitialised allocations, which draw nothing) and the MindSpore and internal spellings
RANDOM_APIS = frozenset(name for name in NAMING_RANDOM if "empty" not in name) | frozenset({
    "dropout_", "fused_dropout", "_fused_dropout", "rrelu_with_noise", "uniform", "poisson", "standard_normal",
    "standard_laplace", "random_gamma", "random_poisson", "random_categorical", "shuffle", "choice_with_mask",
    "dropout_ext", "dropout_gen_mask", "dropout_do_mask", "randn_ext", "rand_ext", "randint_like_ext",
    "scaled_dot_product_attention",  # dropout_p > 0 draws from the generator
    "StandardNormal", "UniformReal", "UniformInt", "Dropout", "DropoutGenMask", "RandomChoiceWithMask",
})


@lru_cache(maxsize=4096)
def is_random_call(key: str) -> bool:
    """Whether a call key ("Functional.dropout", "Tensor.uniform_", "Aten.bernoulli.p", "Primitive.Dropout")
    names a random API."""
    parts = key.split(".")
    return any(part in RANDOM_APIS for part in parts[1:])
