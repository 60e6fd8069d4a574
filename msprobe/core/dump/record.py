"""Record building: turn args/kwargs/outputs into the JSON descriptors of dump.json.

A `RecordBuilder` walks nested tuples/lists/dicts and asks the adapter about tensors. Tensor
statistics are filled at once when the adapter has them (host tensors), or stay deferred (see
adapter.py) until `resolve()` fills every pending descriptor with one batched call. The statistics keys
come from the table of stats.py. Every tensor described with a file stem is shown to `on_tensor(tensor,
file name, descriptor)` (the task: the tensor task saves it at once, overflow_check keeps it as a candidate),
and in md5 mode the CRC-32 is added; in xor mode the bitwise fingerprint of stats.py (key "xor", deferred like
the statistics when the adapter leaves it on a device). Descriptor key order follows the reference: type, dtype,
shape, Max, Min, Mean, Norm, requires_grad, then md5 (or xor) or data_name.
"""
import math
import weakref

from msprobe.core.dump.adapter import ViewKey
from msprobe.core.dump.json_files import holds_nonfinite
from msprobe.core.dump.stats import FINGERPRINT_KEY, STAT_KEYS

__all__ = ["RecordBuilder", "describe_plain"]

_SCALARS = (bool, int, float, str)
_SCALAR_NAMES = {bool: "bool", int: "int", float: "float", str: "str"}  # exact types: no conversion needed
_NO_STATS = dict.fromkeys(STAT_KEYS)
# a descriptor is built as one dict display when the table has its usual four statistics (2-3x cheaper than a
# display followed by update(zip(...)), and it runs for every tensor); any other table takes the general way
_FOUR = STAT_KEYS if len(STAT_KEYS) == 4 else None
_K0, _K1, _K2, _K3 = _FOUR or (None,) * 4


def _builtin(value):
    """A scalar as its builtin type: numpy's float64 is a float, but marshal (the JSON helper's
    transport) writes it as bytes, and the step's JSON files were lost."""
    for kind in _SCALARS:
        if isinstance(value, kind):
            return value if type(value) is kind else kind(value)
    return value


def _all_finite(values):
    """Whether no value of a statistics tuple is a NaN or an infinity (None and ints are finite)."""
    for value in values:
        if value is None or type(value) is int:
            continue
        try:
            if not math.isfinite(value):
                return False
        except TypeError:  # not a number: whether the writer may take its nulls as Nones is not known
            return False
    return True


def describe_plain(value):
    """Descriptor of a framework-neutral non-tensor value, or None if it is not one."""
    if value is None:
        return None
    name = _SCALAR_NAMES.get(type(value))
    if name is not None:
        return {"type": name, "value": value}
    if isinstance(value, _SCALARS):
        return {"type": type(value).__name__, "value": _builtin(value)}
    if isinstance(value, slice):
        return {"type": "slice", "value": [_plain_value(value.start), _plain_value(value.stop),
                                           _plain_value(value.step)]}
    if value is Ellipsis:
        return {"type": "ellipsis", "value": "..."}
    return None


def _plain_value(value):
    return _builtin(value) if value is None or isinstance(value, _SCALARS) else str(value)


class RecordBuilder:
    """Describes values for one dump; holds pending statistics until `resolve()`.

    on_tensor(tensor, file_name, desc): called for each tensor described with a file stem; None: no file
    names at all (statistics task). It sets desc["data_name"] when it saves the tensor.
    """

    def __init__(self, adapter, summary_mode="statistics", on_tensor=None):
        self.adapter = adapter
        self.want_md5 = summary_mode == "md5"
        self.want_xor = summary_mode == FINGERPRINT_KEY
        self._digests = self.want_md5 or self.want_xor
        self._pending_xor = []  # (descriptor, handle) of fingerprints still on a device
        self.on_tensor = on_tensor
        self._tensor_class = adapter.tensor_class  # an isinstance check is cheaper than a method call
        self._pending = []      # (descriptor, handle)
        # content key -> (weakref to the memory's owner or None, statistics or handle, fingerprint of the memory's
        # own bytes or None, {ViewKey.layout: fingerprint} of its transposed views or None)
        self._stats_cache = {}
        self.placed = {}  # id(descriptor) -> (descriptor, placement text, mesh ranks) of the step's sharded tensors
        self._crc_cache = {}  # content key -> CRC (same validity as the statistics: dropped when their entry is made)
        # no float described in this step is a NaN or an infinity: the JSON writer then takes orjson's nulls as Nones
        # without walking each entry that holds one (json_files.encode_dump_bytes' `finite`); cleared by any such
        # value (statistics, a float argument) and by what the adapter describes itself
        self.finite = True

    def release(self):
        """The step is over: drop the caches (their entries hold the step's statistics)."""
        self._stats_cache.clear()
        self._crc_cache.clear()

    # -- statistics -------------------------------------------------------------------------
    def forget(self, tensor):
        """Drop cached statistics and digests after tensors were changed behind their version counters
        (collectives): all of them, as the slices and other views of that memory have keys of their own."""
        self._stats_cache.clear()
        self._crc_cache.clear()

    def written(self, tensor):
        """`tensor` was written in place and its version counter says so only later (an ATen op seen from inside a
        dispatch mode: the counter moves once the mode has returned): its cached statistics and digests go,
        so the op's output is described as it is now, not as the op's input was."""
        key = self.adapter.tensor_facts(tensor)[4]
        if key is not None:
            self._stats_cache.pop(key, None)
            self._crc_cache.pop(key, None)

    def describe_tensor(self, tensor, data_name=None):
        """Descriptor of one tensor; deferred statistics are filled by `resolve()`."""
        adapter = self.adapter
        kind, dtype, shape, requires_grad, key = adapter.tensor_facts(tensor)
        hit = self._stats_cache.get(key) if key is not None else None
        # the first tensor's memory must still be allocated: then it cannot have been reused
        if hit is not None and hit[0] is not None and hit[0]() is not None:
            stats = hit[1]
            if not self.want_xor:
                fingerprint = None
            elif type(key) is ViewKey:  # a transposed view of the memory: its own C order
                fingerprint = self._view_fingerprint(tensor, key, hit)
            else:
                fingerprint = hit[2]
                if fingerprint is None:  # the memory was first met through a transposed view
                    fingerprint = adapter.fingerprint(tensor)
                    self._stats_cache[key] = (hit[0], stats, fingerprint, hit[3])
        else:
            hit = False
            stats, fingerprint, owner = adapter.tensor_digest(tensor, self.want_xor, key is not None, key)
            if self.finite and type(stats) is tuple and not _all_finite(stats):
                self.finite = False
            if key is not None:
                try:
                    ref = weakref.ref(owner)
                except TypeError:
                    ref = None
                # a CRC cached for this key belongs to the entry replaced here (memory freed and allocated again at
                # the same address, version and size): equal keys, ViewKeys included, pop it
                self._crc_cache.pop(key, None)
                # equal keys share the statistics; the fingerprint only when the key says the bytes in C order are
                # the memory's own (not a ViewKey: the fingerprint depends on the order of the elements)
                if type(key) is ViewKey:
                    views = {key.layout: fingerprint} if fingerprint is not None else None
                    self._stats_cache[key] = (ref, stats, None, views)
                else:
                    self._stats_cache[key] = (ref, stats, fingerprint, None)
        if type(stats) is tuple and _FOUR is not None and requires_grad is not None:
            # the usual host tensor: the descriptor as one dict display (each key inserted after it costs about as
            # much as the display's seven)
            high, low, mean, norm = stats
            if type(fingerprint) is str:
                desc = {"type": kind, "dtype": dtype, "shape": shape, _K0: high, _K1: low, _K2: mean, _K3: norm,
                        "requires_grad": requires_grad, FINGERPRINT_KEY: fingerprint}
            else:
                desc = {"type": kind, "dtype": dtype, "shape": shape, _K0: high, _K1: low, _K2: mean, _K3: norm,
                        "requires_grad": requires_grad}
                if self._digests:
                    self._add_digest(desc, tensor, fingerprint, key, hit)
        else:
            desc = {"type": kind, "dtype": dtype, "shape": shape}
            if type(stats) is tuple:
                desc.update(zip(STAT_KEYS, stats))
            else:
                desc.update(_NO_STATS)
                if stats is not None:
                    self._pending.append((desc, stats))
            if requires_grad is not None:
                desc["requires_grad"] = requires_grad
            if self._digests:
                self._add_digest(desc, tensor, fingerprint, key, hit)
        if type(shape) is not tuple and type(shape) is not list:
            self._place(desc, shape)
        if data_name is not None and self.on_tensor is not None:
            self.on_tensor(tensor, data_name + adapter.tensor_suffix, desc)
        return desc

    def _add_digest(self, desc, tensor, fingerprint, key, hit):
        """The descriptor's "md5" or "xor" key, after the statistics (a fingerprint left on a device is filled by
        `resolve`)."""
        if self.want_md5:
            desc["md5"] = self._crc(tensor, key, hit)
        else:
            desc[FINGERPRINT_KEY] = fingerprint if fingerprint is None or type(fingerprint) is str else None
            if fingerprint is not None and type(fingerprint) is not str:
                self._pending_xor.append((desc, fingerprint))

    def _place(self, desc, shape):
        """A sharded tensor's local shape (layout.json): its placement noted, the shape written as a plain tuple."""
        placement = getattr(shape, "placement", None)
        if placement is not None:
            desc["shape"] = tuple(shape)
            self.placed[id(desc)] = (desc, placement, shape.mesh)

    def _view_fingerprint(self, tensor, key, hit):
        """The fingerprint of a view whose bytes are not its memory's (a transpose), kept in its memory's cache
        entry `hit` per layout (ViewKey.layout): at L2 a transposed weight is met by several ops of a step."""
        views = hit[3]
        fingerprint = views.get(key.layout) if views is not None else None
        if fingerprint is None:
            fingerprint = self.adapter.fingerprint(tensor)
            if views is None:
                views = {}
                self._stats_cache[key] = (hit[0], hit[1], hit[2], views)
            views[key.layout] = fingerprint
        return fingerprint

    def _crc(self, tensor, key, hit):
        """The tensor's CRC, shared by tensors of one statistics-cache key when the key says their bytes are
        the same (not a ViewKey): a tensor seen as one op's output and the next op's input is read once."""
        adapter = self.adapter
        if key is None or type(key) is ViewKey:
            return adapter.crc32(tensor)
        crc = self._crc_cache.get(key) if hit else None  # the key's memory is still the same allocation
        if crc is None:
            crc = self._crc_cache[key] = adapter.crc32(tensor)
        return crc

    # -- structures -------------------------------------------------------------------------
    def describe(self, value, data_name=None):
        """Descriptor of any value; `data_name` is the file stem for tensors (tensor mode)."""
        tensor_class = self._tensor_class
        if isinstance(value, tensor_class) if tensor_class is not None else self.adapter.is_tensor(value):
            return self.describe_tensor(value, data_name)
        name = _SCALAR_NAMES.get(type(value))  # the common plain values (sizes, dims, flags) first
        if name is not None:
            if name == "float" and value - value != 0:  # NaN or an infinity
                self.finite = False
            return {"type": name, "value": value}
        if value is None or isinstance(value, _SCALARS) or isinstance(value, slice):
            desc = describe_plain(value)
            if desc is not None and self.finite and holds_nonfinite(desc):
                self.finite = False
            return desc
        kind = type(value)
        if kind not in (list, tuple, dict):  # tuple subclasses such as torch.Size are described whole
            other = self.adapter.describe_other(value)
            if other is not None:
                if self.finite and holds_nonfinite(other):
                    self.finite = False
                return other
        if isinstance(value, (list, tuple)):
            if data_name is None:
                return tuple([self.describe(item) for item in value])
            return tuple([self.describe(item, f"{data_name}.{i}") for i, item in enumerate(value)])
        if isinstance(value, dict):
            if data_name is None:
                return {str(k): self.describe(v) for k, v in value.items()}
            return {str(k): self.describe(v, f"{data_name}.{k}") for k, v in value.items()}
        plain = describe_plain(value)
        if plain is not None or value is None:
            return plain
        return {"type": type(value).__name__, "value": str(value)[:200]}

    # Sequences are described as tuples (written as JSON lists): immutable, so the writer thread can
    # encode them while the next step runs. File names only for tasks that save (on_tensor), given a stem.
    def describe_args(self, args, stem):
        """input_args: one descriptor per positional argument (files `{stem}.0`, `{stem}.1`...)."""
        describe = self.describe
        if self.on_tensor is None or stem is None:
            tensor_class = self._tensor_class
            if tensor_class is not None:  # tensors straight to describe_tensor: one Python frame less each
                describe_tensor = self.describe_tensor
                return tuple([describe_tensor(arg) if isinstance(arg, tensor_class) else describe(arg) for arg in args])
            return tuple([describe(arg) for arg in args])
        return tuple([describe(arg, f"{stem}.{i}") for i, arg in enumerate(args)])

    def describe_kwargs(self, kwargs, stem):
        """input_kwargs: name -> descriptor (files `{stem}.{name}`)."""
        if not kwargs:
            return {}
        describe = self.describe
        if self.on_tensor is None or stem is None:
            return {str(k): describe(v) for k, v in kwargs.items()}
        return {str(k): describe(v, f"{stem}.{k}") for k, v in kwargs.items()}

    def describe_output(self, output, stem):
        """output: always a sequence, like the reference (a single tensor becomes [descriptor])."""
        if isinstance(output, (list, tuple)):
            return self.describe_args(output, stem)
        if self.on_tensor is None or stem is None:
            tensor_class = self._tensor_class
            if tensor_class is not None and isinstance(output, tensor_class):  # most calls: one tensor out
                return (self.describe_tensor(output),)
            return (self.describe(output),)
        return (self.describe(output, f"{stem}.0"),)

    # -- resolution -------------------------------------------------------------------------
    def pending_count(self):
        return len(self._pending)

    def resolve(self, start=0):
        """Fill the statistics of pending descriptors from index `start` on (all by default); and every
        pending fingerprint."""
        if self._pending_xor:
            values = self.adapter.resolve_fingerprints([handle for _, handle in self._pending_xor])
            for (desc, _), value in zip(self._pending_xor, values):
                desc[FINGERPRINT_KEY] = value
            self._pending_xor.clear()
        batch = self._pending[start:]
        if not batch:
            return
        values = self.adapter.resolve_stats([handle for _, handle in batch])
        for (desc, _), stats in zip(batch, values):
            desc.update(zip(STAT_KEYS, stats))
            if self.finite and not _all_finite(stats):
                self.finite = False
        del self._pending[start:]

    def new_step(self):
        """Forget cached statistics (a new step has new tensors)."""
        self.resolve()
        self._stats_cache.clear()
        self._crc_cache.clear()
        self.placed = {}


def layout_mirror(data, placed):
    """layout.json's 'meshes' (the distinct meshes' ranks) and 'data': the entries of dump.json's `data`
    that hold sharded tensors, in the same nesting, each sharded tensor's descriptor replaced by
    {"type": "placement", "value": "Shard(0)", "mesh": [ranks]} and every other leaf by null, so a reader
    names its rows as it names dump.json's."""
    def mirror(node):
        if type(node) is dict and "type" in node:
            hit = placed.get(id(node))
            return None if hit is None else {"type": "placement", "value": hit[1], "mesh": hit[2]}
        if isinstance(node, (list, tuple)):
            return [mirror(child) for child in node]
        if isinstance(node, dict):
            return {key: mirror(child) for key, child in node.items()}
        return None

    def holds(node):
        if type(node) is dict and "type" in node:
            return id(node) in placed
        children = node if isinstance(node, (list, tuple)) else node.values() if isinstance(node, dict) else ()
        return any(holds(child) for child in children)

    meshes = sorted({tuple(hit[2]) for hit in placed.values()})
    return {"meshes": [list(mesh) for mesh in meshes],
            "data": {name: mirror(body) for name, body in data.items() if holds(body)}}
