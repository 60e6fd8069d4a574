"""Framework-free facts of a run: environment variables (secrets masked), installed packages, hyperparameters
read from shell scripts, YAML files, an argparse namespace or a dict, and fingerprints of arrays."""
import hashlib
import os
import re
import shlex
from typing import Any, Dict, Iterable, List, Mapping, Optional

import numpy as np

from msprobe.core.errors import ConfigError
from msprobe.core.paths import check_path, load_yaml

__all__ = ["environment", "packages", "is_secret_name", "MASK", "hyperparameters", "array_fingerprint",
           "combine_fingerprints"]

MASK = "******"
# names that look like credentials: their values never enter a pack
_SECRET = re.compile(r"(TOKEN|SECRET|PASSW|PASSWD|PWD|CREDENTIAL|PRIVATE|AUTH|COOKIE|SESSION|API_?KEY|ACCESS_?KEY|"
                     r"(^|_)KEY($|_))", re.IGNORECASE)
_MAX_SCRIPT_BYTES = 10 * 1024 * 1024


def is_secret_name(name: str) -> bool:
    return bool(_SECRET.search(str(name)))


def environment(env: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """Every environment variable, the values of secret-looking names replaced by MASK."""
    env = os.environ if env is None else env
    return {name: MASK if is_secret_name(name) else value for name, value in sorted(env.items())}


def packages() -> Dict[str, str]:
    """Installed distributions and their versions."""
    from importlib import metadata

    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found[name.lower().replace("_", "-")] = dist.version
    return dict(sorted(found.items()))


def _flatten(value: Any, prefix: str, out: Dict[str, Any], depth: int = 0) -> None:
    if depth > 32:
        raise ConfigError(f"hyperparameters nest deeper than 32 levels at '{prefix[:120]}'.")
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out, depth + 1)
    else:
        out[prefix] = value


def _masked(values: Dict[str, Any]) -> Dict[str, Any]:
    return {name: MASK if is_secret_name(name.rsplit(".", 1)[-1]) else _plain(value) for name, value in values.items()}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return repr(value)


def _shell_arguments(path: str) -> Dict[str, Any]:
    """`--name value`, `--name=value` and `NAME=value` words of a shell script (no line of it is run)."""
    path = check_path(path, kind="file", what="shell_path")
    if os.path.getsize(path) > _MAX_SCRIPT_BYTES:
        raise ConfigError(f"shell_path '{path}' is larger than {_MAX_SCRIPT_BYTES >> 20} MB.")
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read().replace("\\\n", " ")
    found: Dict[str, Any] = {}
    value: Any
    for line in text.splitlines():
        line = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        for n, word in enumerate(words):
            if word.startswith("--") and len(word) > 2:
                name, has_value, value = word[2:].partition("=")
                if not has_value:
                    following = words[n + 1] if n + 1 < len(words) else None
                    value = following if following is not None and not following.startswith("--") else True
                found[name.replace("-", "_")] = value
            elif re.fullmatch(r"(export\s+)?[A-Za-z_][A-Za-z0-9_]*=.*", word):
                name, _, value = word.partition("=")
                found[name] = value
    return found


def hyperparameters(shell_paths: Iterable[str] = (), yaml_paths: Iterable[str] = (), given: Any = None
                    ) -> Dict[str, Any]:
    """One flat dict of hyperparameters, later sources overriding earlier ones: shell scripts, YAML files, then
    `given` (an argparse.Namespace or a dict). Secret-looking names are masked."""
    values: Dict[str, Any] = {}
    for path in shell_paths or ():
        values.update(_shell_arguments(path))
    for path in yaml_paths or ():
        _flatten(load_yaml(path, "yaml_path") or {}, "", values)
    if given is not None:
        _flatten(vars(given) if hasattr(given, "__dict__") and not isinstance(given, Mapping) else given, "", values)
    return _masked(values)


def array_fingerprint(array: np.ndarray) -> Dict[str, Any]:
    """Shape, dtype and a SHA-256 of the bytes: equal arrays give equal fingerprints, any changed bit another."""
    array = np.ascontiguousarray(array)
    return {"shape": list(array.shape), "dtype": str(array.dtype),
            "sha256": hashlib.sha256(array.view(np.uint8).reshape(-1).tobytes()).hexdigest()}


def combine_fingerprints(parts: List[Dict[str, Any]]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(sorted(part.items())).encode())
    return digest.hexdigest()
