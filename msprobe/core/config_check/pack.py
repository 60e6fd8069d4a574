"""ConfigChecker: pack, per rank, one zip of what a training run was set up with.

The zip is written when the checker is built (environment, packages, framework facts, hyperparameters, initial
weights) and again, whole and atomically, when the first batches have been seen and at exit, so a crash keeps
what was known. `ConfigChecker.apply_patches(fmk)` before training also records the first batches the data
loader yields and every seed and random call; `ConfigChecker.remove_patches()` (or exit) takes the patches out.
"""
import atexit
import hashlib
import io
import json
import os
import random
import threading
import traceback
import zipfile
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from msprobe.core.config_check import facts as run_facts
from msprobe.core.config_check.probe import ConfigCheckProbe
from msprobe.core.dump.session import HookSession
from msprobe.core.errors import ConfigError
from msprobe.core.paths import atomic_write_bytes, check_path, ensure_dir

__all__ = ["ConfigChecker", "PACK_VERSION", "CHECKS"]

PACK_VERSION = 1
#: the files of a pack, one per check, in report order
CHECKS = ("framework", "packages", "environment", "hyperparameters", "weights", "dataset", "random")
_FRAMEWORKS = ("pytorch", "mindspore")
# frames of these folders are the machinery between a user's line and a random draw
_INTERNAL_DIRS = ("/msprobe/", "/torch/", "/mindspore/", "/numpy/", "/lightning/", "/accelerate/")


def _probe(fmk: str) -> ConfigCheckProbe:
    if fmk not in _FRAMEWORKS:
        raise ConfigError(f"fmk must be one of {', '.join(_FRAMEWORKS)}, got {str(fmk)[:40]!r}.")
    from msprobe.core.framework import get_framework

    return get_framework(fmk).config_check_probe()


def _rank(fmk: str) -> int:
    from msprobe.core.framework import current_rank, get_framework

    return int(current_rank(get_framework(fmk), default=0) or 0)


class _Recorder:
    """The patches of apply_patches: first batches, seed calls and random draws, in call order."""

    def __init__(self, probe: ConfigCheckProbe, batches: int):
        self.probe, self.batches_wanted = probe, batches
        self.batches: List[Dict[str, Any]] = []
        self.seeds: List[Dict[str, Any]] = []
        self.draws: Dict[str, Dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.session = HookSession()
        self.on_batches_done: Optional[Callable[[], None]] = None
        with self.session.installing():
            for owner, attr, _label in probe.batch_sources():
                self.session.patch(owner, attr, self._batch_source(getattr(owner, attr)))
            for owner, attr, label in probe.seed_apis() + [(random, "seed", "random.seed"),
                                                             (np.random, "seed", "numpy.random.seed")]:
                self.session.patch(owner, attr, self._seed(getattr(owner, attr), label))
            for owner, attr, label in probe.random_apis():
                self.session.patch(owner, attr, self._draw(getattr(owner, attr), label))

    def _batch_source(self, original):
        recorder = self

        def iterate(*args, **kwargs):
            for batch in original(*args, **kwargs):
                if len(recorder.batches) < recorder.batches_wanted:
                    recorder._record_batch(batch)
                yield batch
        return iterate

    def _record_batch(self, batch):
        parts = []
        self._tensors(batch, "batch", parts)
        with self.lock:
            self.batches.append({"index": len(self.batches), "tensors": parts,
                                 "sha256": run_facts.combine_fingerprints(parts)})
            done = len(self.batches) == self.batches_wanted
        if done and self.on_batches_done:
            self.on_batches_done()

    def _tensors(self, value, path, parts, depth=0):
        if depth > 16 or len(parts) > 1000:
            return
        array = self.probe.to_numpy(value)
        if array is not None:
            parts.append({"path": path, **run_facts.array_fingerprint(array)})
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                self._tensors(value[key], f"{path}.{key}", parts, depth + 1)
        elif isinstance(value, (list, tuple)):
            for n, item in enumerate(value):
                self._tensors(item, f"{path}.{n}", parts, depth + 1)
        elif isinstance(value, np.ndarray):
            parts.append({"path": path, **run_facts.array_fingerprint(value)})

    @staticmethod
    def _caller():
        """The innermost frame outside msprobe and the frameworks: the model or loop line that drew."""
        for frame in reversed(traceback.extract_stack(limit=40)[:-2]):
            path = frame.filename.replace(os.sep, "/")
            if not any(part in path for part in _INTERNAL_DIRS):
                return f"{frame.filename}:{frame.lineno}"
        return ""

    def _seed(self, original, label):
        recorder = self

        def seed(*args, **kwargs):
            with recorder.lock:
                recorder.seeds.append({"api": label, "args": [repr(a)[:200] for a in args],
                                       "kwargs": {k: repr(v)[:200] for k, v in kwargs.items()},
                                       "where": recorder._caller()})
            return original(*args, **kwargs)
        return seed

    def _draw(self, original, label):
        recorder = self

        def draw(*args, **kwargs):
            with recorder.lock:
                entry = recorder.draws.get(label)
                if entry is None:  # the generator state before the first draw: where the streams part
                    recorder.draws[label] = {"api": label, "calls": 1, "first_where": recorder._caller(),
                                             "state_before_first": recorder.state_fingerprints()}
                else:
                    entry["calls"] += 1
            return original(*args, **kwargs)
        return draw

    def state_fingerprints(self) -> Dict[str, str]:
        states = dict(self.probe.rng_states())
        states["random"] = repr(random.getstate()).encode()
        states["numpy"] = repr(np.random.get_state()).encode()
        return {name: hashlib.sha256(state).hexdigest() for name, state in sorted(states.items())}


class ConfigChecker:
    """Pack this rank's run setup into `output_zip_path` (rank r of a multi-rank job: `..._rank{r}.zip`).

    model: the model (PyTorch nn.Module / MindSpore Cell) whose initial weights are fingerprinted per parameter.
    shell_path / yaml_path: launch scripts and config files whose arguments are hyperparameters (never run).
    hyperparameters: an argparse.Namespace or a dict, overriding what the files say.
    """
    _recorder: Optional[_Recorder] = None

    def __init__(self, model: Any = None, output_zip_path: str = "./config_check_pack.zip", fmk: str = "pytorch",
                 shell_path: Sequence[str] = (), yaml_path: Sequence[str] = (), hyperparameters: Any = None):
        self.probe = _probe(fmk)
        self.fmk = fmk
        self.path = self._rank_path(output_zip_path, fmk)
        self.content: Dict[str, Any] = {
            "meta": {"pack_version": PACK_VERSION, "fmk": fmk, "rank": _rank(fmk)},
            "framework": self.probe.facts(),
            "packages": run_facts.packages(),
            "environment": run_facts.environment(),
            "hyperparameters": run_facts.hyperparameters(_list(shell_path), _list(yaml_path), hyperparameters),
            "weights": self._weights(model) if model is not None else {},
        }
        self.write()
        recorder = ConfigChecker._recorder
        if recorder is not None:
            recorder.on_batches_done = self.write
        atexit.register(self.write)

    @staticmethod
    def _rank_path(path: str, fmk: str) -> str:
        full = check_path(path, kind="file", must_exist=False, writable=True, what="output_zip_path")
        if not full.endswith(".zip"):
            raise ConfigError(f"output_zip_path '{full}' must end with .zip.")
        world = int(os.environ.get("WORLD_SIZE", os.environ.get("RANK_SIZE", "1")) or 1)
        if world > 1:
            full = f"{full[:-4]}_rank{_rank(fmk)}.zip"
        ensure_dir(os.path.dirname(full))
        return full

    def _weights(self, model: Any) -> Dict[str, Any]:
        weights = {}
        for name, tensor in self.probe.named_parameters(model):
            array = self.probe.to_numpy(tensor)
            if array is not None:
                weights[name] = run_facts.array_fingerprint(array)
        return weights

    def _recorded(self) -> Dict[str, Any]:
        recorder = ConfigChecker._recorder
        if recorder is None:
            return {"dataset": {"recorded": False}, "random": {"recorded": False}}
        with recorder.lock:
            return {"dataset": {"recorded": True, "batches": list(recorder.batches)},
                    "random": {"recorded": True, "seeds": list(recorder.seeds), "draws": dict(recorder.draws),
                               "state_now": recorder.state_fingerprints()}}

    def write(self) -> None:
        """(Re)write the whole pack atomically: readers never see half a zip."""
        buffer = io.BytesIO()
        content = {**self.content, **self._recorded()}
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in ("meta",) + CHECKS:
                archive.writestr(f"{name}.json", json.dumps(content.get(name, {}), indent=1, sort_keys=True,
                                                            default=repr))
        atomic_write_bytes(self.path, buffer.getvalue())

    @classmethod
    def apply_patches(cls, fmk: str = "pytorch", batches: int = 2) -> None:
        """Record the first `batches` batches every data loader yields, and seed/random calls, from now on."""
        if cls._recorder is not None:
            return
        if not isinstance(batches, int) or batches < 0:
            raise ConfigError(f"batches must be a non-negative integer, got {batches!r}.")
        cls._recorder = _Recorder(_probe(fmk), batches)

    @classmethod
    def remove_patches(cls) -> None:
        """Take every patch out (the framework is as it was before apply_patches)."""
        recorder, cls._recorder = cls._recorder, None
        if recorder is not None:
            recorder.session.close()


def _list(value) -> List[str]:
    if value is None:
        return []
    return [os.fspath(value)] if isinstance(value, (str, os.PathLike)) else [os.fspath(v) for v in value]


