"""RNG audit: which dumped calls draw random numbers, so the dump can record the random state they start from.

With summary_mode "xor", the entry of every call named here gets a key "rng": the fingerprint (stats.fingerprint)
of the framework's random-number state as the call begins (the adapter's `random_state()`: torch's CPU
generator and every initialised CUDA generator; MindSpore's global generator). Two runs whose random streams
parted are then found at the first random call whose "rng" differs (compare's first divergence, class
"random"), however many calls later the outputs start to differ.

    is_random_call("Functional.dropout") -> True;  is_random_call("Aten.native_dropout.default") -> True
"""
from functools import lru_cache

__all__ = ["RANDOM_APIS", "is_random_call"]

#: API names (the last part of a call's name that is not a counter or overload) that draw random numbers
RANDOM_APIS = frozenset({
    "dropout", "dropout_", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
    "native_dropout", "fused_dropout", "_fused_dropout", "rrelu", "rrelu_", "rrelu_with_noise", "gumbel_softmax",
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "bernoulli", "bernoulli_",
    "multinomial", "normal", "normal_", "uniform", "uniform_", "random_", "exponential_", "geometric_",
    "cauchy_", "log_normal_", "poisson", "standard_normal", "standard_laplace", "random_gamma", "random_poisson",
    "random_categorical", "shuffle", "choice_with_mask", "fractional_max_pool2d", "fractional_max_pool3d",
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
