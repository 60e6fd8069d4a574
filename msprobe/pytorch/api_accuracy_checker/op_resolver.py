"""Find the PyTorch callable behind a dump name prefix + API, or say why it cannot be checked.

Names resolve only through the allow-list of the APIs the dump wraps (msprobe.core.api_resolver):
a name from a dump.json, a config_op.json or a socket never walks attributes."""
from msprobe.core.api_resolver import resolve
from msprobe.core.errors import UnsupportedError
from msprobe.core.naming import RANDOM_APIS, is_inplace, is_random_api
from msprobe.pytorch.dump.api_names import api_allow_list

__all__ = ["resolve_api", "is_inplace", "RANDOM_APIS"]  # the rules live in core.naming


def resolve_api(prefix, api, warn=True):
    """The callable for ('Functional', 'linear'), ('Torch', 'matmul'), ('Tensor', 'add_'), ('Aten', 'mm');
    UnsupportedError (ApiNameRefused for names outside the allow-list) otherwise."""
    if prefix == "Distributed":
        raise UnsupportedError("communication API: needs a process group, not checked by run_ut")
    if prefix in ("NPU", "npu"):
        raise UnsupportedError("NPU fused operator: no kernel in this environment (torch_npu missing)")
    if is_random_api(api):
        raise UnsupportedError("random or uninitialised output: two runs cannot be compared")
    return resolve(api_allow_list(), prefix, api, warn)
