"""Load one dump.json (and its stack.json) into a flat, columnar table of compare rows.

Each tensor (or scalar, or null) of a dump entry becomes one row named the way the reports name it:
`{entry}.input.{i}`, `{entry}.input.{kwarg}`, `{entry}.parameters.{name}`, `{entry}.output.{i}`,
`{Module}.{path}.{Class}.parameters_grad.{name}`; nested lists/dicts append `.{index}` / `.{key}`.

Row columns (lists of equal length, documented keys):
  name, entry, role ('input' | 'parameters' | 'output' | 'parameters_grad'), kind ('tensor' |
  'scalar' | 'text' | 'none'), dtype, shape (display strings), shape_key (tuple or None),
  max, min, mean, norm (floats, NaN when absent), value (display of a non-tensor), md5, data_name,
  absent (bit k set when statistic k of max/min/mean/norm was null in the dump, e.g. an empty tensor
  or the mean of a bool tensor: absent is "not computed", unlike a NaN statistic).
"""
import json
import os
import zlib

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a base dependency; the json module reads the same files
    orjson = None  # type: ignore[assignment]

from msprobe.core.dump_paths import dump_json_of
from msprobe.core.errors import CompareError, ParseError, PathError
from msprobe.core.io.normalise import TOOL_MSPROBE, dump_tool, normalise_dump
from msprobe.core.log import logger
from msprobe.core.naming import is_tensor_descriptor
from msprobe.core.paths import check_path

__all__ = ["DumpTable", "load_dump", "find_dump_file", "same_layout_pair", "table_from_dump", "load_stack", "detect_mode",
           "ROW_COLUMNS", "MODE_TENSOR", "MODE_STATISTICS", "MODE_MD5"]

MODE_TENSOR, MODE_STATISTICS, MODE_MD5 = "tensor", "statistics", "md5"
ROW_COLUMNS = ("name", "entry", "role", "kind", "dtype", "shape", "shape_key", "max", "min", "mean",
               "norm", "value", "md5", "data_name", "absent")
_NAN = float("nan")
_SHAPE_TEXT: dict = {}
_SHAPES: dict = {}
_DTYPES: dict = {}
_TENSOR_KINDS: dict = {}  # "type" value -> whether core.naming calls it a tensor (one rule for every reader)
# dump.json section -> row role and the word used in row names, in report order
_SECTIONS = (("input_args", "input", "input"), ("input_kwargs", "input", "input"), ("input", "input", "input"),
             ("parameters", "parameters", "parameters"), ("output", "output", "output"))


class DumpTable:
    """The rows of one dump.json plus its header fields (task, level, framework, dump_data_dir)."""

    def __init__(self, path, header, data_dir=None):
        self.path = path
        self.header = header
        self.columns = {key: [] for key in ROW_COLUMNS}
        self.entries = []  # entry names in dump order
        self._data_dir = data_dir
        # tables with the same structure number have equal columns but max/min/mean/norm (templates.py)
        self.structure = None
        self.stat_array = None  # (rows, 4) float64 of max/min/mean/norm, when a template made the table
        self.as_written = None  # a reference-layout table: () -> its rows as the file has them (same_layout_pair)

    def __len__(self):
        return len(self.columns["name"])

    @property
    def data_dir(self):
        """Directory holding the tensor files (dump_tensor_data next to dump.json, unless given)."""
        if self._data_dir is not None:
            return self._data_dir
        local = os.path.join(os.path.dirname(self.path), "dump_tensor_data")
        if os.path.isdir(local):
            return local
        recorded = self.header.get("dump_data_dir")
        return recorded if recorded and os.path.isdir(recorded) else local


def _is_leaf(node):
    return node is None or (isinstance(node, dict) and "type" in node)


def _row_of(name, entry, role, node):
    """One row tuple in ROW_COLUMNS order."""
    if node is None:
        return (name, entry, role, "none", "None", "None", None, _NAN, _NAN, _NAN, _NAN, "None", "None", "-1", 15)
    kind_name = node.get("type")
    is_tensor = _TENSOR_KINDS.get(kind_name) if isinstance(kind_name, str) else False
    if is_tensor is None:
        is_tensor = _TENSOR_KINDS.setdefault(kind_name, is_tensor_descriptor({"type": kind_name}))
    if is_tensor or "dtype" in node and "shape" in node:
        get = node.get
        shape = get("shape")
        shape = tuple(shape) if shape else ()
        shape_text = _SHAPE_TEXT.get(shape)
        if shape_text is None:  # shared strings and tuples keep 100k-row tables small
            shape_text = _SHAPE_TEXT.setdefault(shape, str(list(shape)))
            _SHAPES.setdefault(shape, shape)
        dtype = get("dtype")
        if type(dtype) is not str:
            dtype = str(dtype)
        high, low, mean, norm = get("Max"), get("Min"), get("Mean"), get("Norm")
        absent = (high is None) | (low is None) << 1 | (mean is None) << 2 | (norm is None) << 3
        return (name, entry, role, "tensor", _DTYPES.setdefault(dtype, dtype), shape_text, _SHAPES[shape],
                high if type(high) is float else _to_float(high), low if type(low) is float else _to_float(low),
                mean if type(mean) is float else _to_float(mean), norm if type(norm) is float else _to_float(norm),
                None, str(get("md5", "None")), str(get("data_name", "-1")), absent)
    value = node.get("value")
    data_name = str(node.get("data_name", "-1"))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        display = "None" if value is None else str(value)
        md5 = node.get("md5") or _crc32_text("" if value is None else display)
        return (name, entry, role, "text", _class_text(kind_name), "[]", (), _NAN, _NAN, _NAN, _NAN, display,
                str(md5), data_name, 15)
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range is kept as text: compared by value, never as a number
        return (name, entry, role, "text", _class_text(kind_name), "[]", (), _NAN, _NAN, _NAN, _NAN, str(value),
                str(node.get("md5") or _crc32_text(str(value))), data_name, 15)
    return (name, entry, role, "scalar", _class_text(kind_name), "[]", (), number, number, number, number, value,
            str(node.get("md5") or _crc32_text(str(value))), data_name, 0)


def _class_text(kind_name):
    text = f"<class '{kind_name}'>"
    return _DTYPES.setdefault(text, text)


def _crc32_text(text):
    """CRC-32 of a non-tensor value's text, which is how md5 mode compares scalars and strings."""
    crc = format(zlib.crc32(text.encode("utf-8")), "08x")
    return _DTYPES.setdefault(crc, crc)


def _to_float(value):
    if type(value) is float:
        return value
    if value is None or isinstance(value, bool):
        return _NAN if value is None else float(value)
    if isinstance(value, (int, float)):
        return float(value)
    try:  # "inf", "nan" and friends written as strings
        return float(value)
    except (TypeError, ValueError):
        return _NAN


def _walk(rows, prefix, entry, role, node):
    """Depth-first over nested lists/dicts, one row per leaf."""
    if node is None or (type(node) is dict and "type" in node):
        rows.append(_row_of(prefix, entry, role, node))
    elif isinstance(node, (list, tuple)):
        for index, child in enumerate(node):
            _walk(rows, f"{prefix}.{index}", entry, role, child)
    elif isinstance(node, dict):
        for key, child in node.items():
            _walk(rows, f"{prefix}.{key}", entry, role, child)


def _add_entry(rows, entry, body):
    if entry.endswith(".parameters_grad"):
        for key, child in body.items():
            # the reference writes each gradient as a one-element list but names it without the index
            if isinstance(child, list) and len(child) == 1:
                child = child[0]
            _walk(rows, f"{entry}.{key}", entry, "parameters_grad", child)
        return
    for section, role, word in _SECTIONS:
        node = body.get(section)
        if not node:
            continue
        if section == "input_kwargs":
            for key, child in node.items():
                _walk(rows, f"{entry}.{word}.{key}", entry, role, child)
        elif isinstance(node, dict) and not _is_leaf(node):
            for key, child in node.items():
                _walk(rows, f"{entry}.{word}.{key}", entry, role, child)
        elif isinstance(node, (list, tuple)):
            for index, child in enumerate(node):
                _walk(rows, f"{entry}.{word}.{index}", entry, role, child)
        else:
            _walk(rows, f"{entry}.{word}.0", entry, role, node)


def _read_json(path, what):
    """The parsed file. orjson reads it 5-10x faster than the json module; what orjson refuses (NaN and
    Infinity literals, ints over 64 bits, lone surrogates, invalid files) goes to the json module, which
    reads the first three the way it always did and words the errors of the rest."""
    if orjson is not None:
        with open(path, "rb") as handle:
            data = handle.read()
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{what} '{path}' is not valid JSON (line {exc.lineno}, column {exc.colno}): "
                         f"{exc.msg}. Is it truncated? Dump it again or fix the file.") from None
    except UnicodeDecodeError:
        raise ParseError(f"{what} '{path}' is not UTF-8 text.") from None
    except (ValueError, RecursionError) as exc:  # ints of more than 4300 digits, nesting too deep
        raise ParseError(f"{what} '{path}' cannot be read: {str(exc).splitlines()[0][:200]}") from None




def find_dump_file(path):
    """The dump.json a path names: the file itself, or the one dump.json of a dump folder (dump_paths.dump_json_of:
    its rank folder, its step folder or the dump path). A folder holding no dump.json, or several, raises
    CompareError saying what it found."""
    if not os.path.isdir(path):
        return path
    try:
        return dump_json_of(path, "dump folder")
    except PathError as exc:
        raise CompareError(str(exc)) from None


def load_dump(path, templates=None):
    """Read a dump.json (or a dump folder's one dump.json, find_dump_file) into a DumpTable; a corrupt file
    raises ParseError naming it. `templates` (templates.DumpTemplates) reuses the structure of files read
    before: a job's ranks."""
    path = check_path(find_dump_file(path), kind="file", what="dump file", allow_symlink=True)
    if templates is None or orjson is None:
        return table_from_dump(_read_json(path, "dump file"), path)
    with open(path, "rb") as handle:
        data = handle.read()

    def full(text):  # as _read_json: what orjson refuses goes to the json module, with its messages
        try:
            raw = orjson.loads(text)
        except orjson.JSONDecodeError:
            raw = _read_json(path, "dump file")
        return table_from_dump(raw, path)

    table = templates.load(path, data, full, lambda text: table_from_dump(orjson.loads(text), path))
    if table.as_written is None and table.header.get("tool") != TOOL_MSPROBE:
        # a template's copy of a reference-layout table: its rows as written, for a pair of two such dumps
        table.as_written = lambda: table_from_dump(orjson.loads(data), path, normalise=False)
    return table


def _utf8(name) -> bool:
    try:
        str(name).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def table_from_dump(raw, path="<memory>", data_dir=None, normalise=True):
    """A DumpTable of a dump.json-shaped dict ({"task", "level", "framework", "data": {entry: body}}) that
    need not exist as a file: kernel compare and graph compare build tables in memory. `path` names it
    in messages; tensor files are looked up in `data_dir` (data_name may also be an absolute path).
    The rows are those of the normalised call record (normalise.py); `normalise=False`: as the file has them."""
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
        raise ParseError(f"dump file '{path}' has no 'data' object; is it a msprobe dump.json?")
    if normalise:
        data, tool, not_comparable = normalise_dump(raw["data"], path, raw.get("framework"))
    else:
        data, tool, not_comparable = raw["data"], dump_tool(raw["data"], path, raw.get("framework")), {}
    header = {key: raw.get(key) for key in ("task", "level", "framework", "dump_data_dir")}
    header["tool"] = tool  # normalise.py: who laid the file out; rows whose meaning is that tool's own
    header["not_comparable"] = not_comparable
    table = DumpTable(path, header, data_dir)
    if normalise and tool != TOOL_MSPROBE:
        table.as_written = lambda: table_from_dump(raw, path, data_dir, normalise=False)
    rows = []
    for entry, body in data.items():
        if not isinstance(body, dict):
            raise ParseError(f"dump file '{path}': entry '{entry}' is not an object.")
        if not _utf8(entry):  # a lone surrogate ("\ud800" in the JSON): no report could write the name
            logger.warning("dump file '%s': entry '%s' is skipped: its name is not UTF-8 (a lone surrogate).",
                           path, entry.encode("utf-8", "backslashreplace").decode("utf-8")[:200])
            continue
        table.entries.append(entry)
        try:
            _add_entry(rows, entry, body)
        except OverflowError:
            raise ParseError(f"dump file '{path}': entry '{entry}' holds a statistic beyond the float range "
                             "(a corrupt or hand-edited dump); dump it again.") from None
        except (TypeError, AttributeError):
            raise ParseError(f"dump file '{path}': entry '{entry}' is not shaped like a dump entry.") from None
    if rows:
        table.columns = {key: list(values) for key, values in zip(ROW_COLUMNS, zip(*rows))}
    return table


def load_stack(path):
    """stack.json -> {entry name: stack text}. Accepts both `{name: [lines]}` and the grouped
    `{"0": [[names...], [lines...]]}` layout."""
    if not path or not os.path.isfile(path):
        return {}
    raw = _read_json(path, "stack file")
    stacks, texts = {}, {}
    if not isinstance(raw, dict):
        raise ParseError(f"stack file '{path}' must hold a JSON object.")
    for key, value in raw.items():
        if (isinstance(value, list) and len(value) == 2 and isinstance(value[0], list)
                and all(isinstance(v, str) for v in value[0]) and key.isdigit()):
            for name in value[0]:
                stacks[name] = str(value[1])
        else:
            stacks[key] = _stack_text(value, texts)
    return stacks


def _stack_text(value, texts):
    """str(value), made once per distinct list of lines: calls in a loop over layers share their stack
    (a GPT's 532 stacks hold 20 distinct ones) and str() of a list escapes every character."""
    if type(value) is not list or not set(map(type, value)) <= {str}:
        return str(value)
    key = tuple(value)
    text = texts.get(key)
    if text is None:
        text = texts[key] = str(value)
    return text


_MODES: dict = {}  # structure number (templates.py) -> mode: the ranks of a job share it


def detect_mode(table):
    """tensor / statistics / md5, from the dump header and the rows themselves."""
    if table.structure is not None:
        mode = _MODES.get(table.structure)
        if mode is None:
            mode = _MODES[table.structure] = _detect_mode(table)
        return mode
    return _detect_mode(table)


def _detect_mode(table):
    task = table.header.get("task")
    if task == "tensor" or any(name != "-1" for name in table.columns["data_name"][:1000]):
        return MODE_TENSOR
    md5 = table.columns["md5"]
    kinds = table.columns["kind"]
    if any(kind == "tensor" and value != "None" for kind, value in zip(kinds[:1000], md5[:1000])):
        return MODE_MD5
    if task not in (None, "statistics", "overflow_check"):
        raise CompareError(f"dump '{table.path}' was written by task '{task}', which compare cannot read; "
                           "use a statistics or tensor dump.")
    return MODE_STATISTICS


def same_layout_pair(npu, bench):
    """The two tables to compare: both laid out by the reference tools (1.2.1 / 26.x) and read from their
    files -> as the files have them, so the report is the one that tool's own compare makes of them;
    otherwise (a mixed pair, tables a job's templates or a sharded run's merge made) the normalised ones."""
    if npu.as_written is None or bench.as_written is None:
        return npu, bench
    return npu.as_written(), bench.as_written()
