"""Name mapping: turn an NPU row name into the bench row name it should be compared with.

Four user mapping files (all optional) and one programmatic hook, applied in this order:
  data_mapping  {npu_row_name: bench_row_name}                           exact per-row override
  api_mapping   [{ms_api, pt_api, ms_args, pt_args, ms_outputs, pt_outputs}]  API type/name + arg indices
  cell_mapping  {"cell_path.Class": "module_path.Class"}                  module path + class
  layer_mapping {LayerClass: {npu_child: bench_child}}                    renames path segments
  entry_mapper  callable(entry_name) -> entry_name                        framework adapters (e.g.
                MindSpore 'Cell.' -> 'Module.', default MindSpore->PyTorch API names)
"""
from dataclasses import replace

from msprobe.core.errors import ConfigError
from msprobe.core.naming import EntryName, parse_row_name

__all__ = ["NameMapper", "load_mapping_file"]

def load_mapping_file(path, what):
    """Load a mapping YAML; its content is validated by NameMapper."""
    from msprobe.core.paths import load_yaml

    content = load_yaml(path, what=what)
    return {} if content is None else content


def _as_dict(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must map names to names (a YAML dictionary), got {type(value).__name__}.")
    return {str(k): str(v) if not isinstance(v, dict) else v for k, v in value.items()}


def _api_rules(value):
    if value is None or value is True:
        return []
    items = value if isinstance(value, list) else [value]
    rules = []
    for item in items:
        if not isinstance(item, dict) or "ms_api" not in item or "pt_api" not in item:
            raise ConfigError("api_mapping entries need 'ms_api' and 'pt_api' keys (see docs/compare.md).")
        args = dict(zip(map(str, item.get("ms_args") or []), map(str, item.get("pt_args") or [])))
        outs = dict(zip(map(str, item.get("ms_outputs") or []), map(str, item.get("pt_outputs") or [])))
        if len(item.get("ms_args") or []) != len(item.get("pt_args") or []):
            raise ConfigError(f"api_mapping for {item['ms_api']}: ms_args and pt_args differ in length.")
        rules.append((str(item["ms_api"]), str(item["pt_api"]), args, outs))
    return rules


class NameMapper:
    """Maps NPU row names to bench row names; identity when no mapping is configured."""

    def __init__(self, data_mapping=None, api_mapping=None, cell_mapping=None, layer_mapping=None,
                 entry_mapper=None):
        self.data = _as_dict(data_mapping, "data_mapping")
        self.api = _api_rules(api_mapping)
        self.cell = _as_dict(cell_mapping if cell_mapping is not True else None, "cell_mapping")
        self.layer = {}
        for layer, children in _as_dict(layer_mapping, "layer_mapping").items():
            if not isinstance(children, dict):
                raise ConfigError(f"layer_mapping: '{layer}' must map child layer names, e.g. qkv: query_key_value.")
            self.layer.update({str(k): str(v) for k, v in children.items()})
        self.entry_mapper = entry_mapper

    @property
    def active(self):
        return bool(self.data or self.api or self.cell or self.layer or self.entry_mapper)

    def map_entry(self, entry):
        """Mapping that applies to a whole entry (API or module call)."""
        if self.entry_mapper is not None:
            entry = self.entry_mapper(entry)
        if self.cell or self.layer:
            entry = self._map_module(entry)
        return entry

    def _map_module(self, entry):
        name = EntryName.parse(entry)
        if name is None or not name.is_module:
            return entry
        path_and_class = name.api
        if path_and_class in self.cell:
            path_and_class = self.cell[path_and_class]
        elif self.layer:
            *segments, class_name = path_and_class.split(".")
            path_and_class = ".".join([self.layer.get(seg, seg) for seg in segments] + [class_name])
        return str(replace(name, prefix="Module" if self.cell else name.prefix, api=path_and_class))

    def _map_api_row(self, name):
        entry, tail = parse_row_name(name)
        if entry is None or entry.is_module:
            return name
        for ms_api, pt_api, args, outs in self.api:
            if f"{entry.prefix}.{entry.api}" != ms_api:
                continue
            role, _, rest = tail.partition(".")
            index, dot, sub = rest.partition(".")
            if role in ("input", "output"):
                table = args if role == "input" else outs
                index = table.get(index, index)
            call_tail = ".".join(part for part in (role, index + dot + sub) if part)
            pt_prefix, _, pt_api_path = pt_api.partition(".")
            return str(replace(entry, prefix=pt_prefix, api=pt_api_path)) + (f".{call_tail}" if call_tail else "")
        return name

    def map_row(self, row_name, entry):
        """The bench row name to look for, given an NPU row name and its entry."""
        if row_name in self.data:
            return self.data[row_name]
        if self.api:
            mapped = self._map_api_row(row_name)
            if mapped != row_name:
                return mapped
        mapped_entry = self.map_entry(entry)
        if mapped_entry == entry:
            return row_name
        return mapped_entry + row_name[len(entry):]
