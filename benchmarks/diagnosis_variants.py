"""The diagnosis benchmark's four views of one tensor dump (tensor/statistics x mix/L1), as compare tables
and as dump directories for graph compare; shared by the PyTorch suite and the MindSpore nets (no
framework import)."""
import json
import os

from msprobe.core.io.load import table_from_dump


def variants(raw, data_dir, module_prefix="Module."):
    """{(mode, level): DumpTable} of one tensor dump: tensor/statistics x mix/L1 (L1: the module rows,
    `module_prefix` "Module." or MindSpore's "Cell.", dropped). Each table names the construct.json and
    stack.json beside the dump (L1: the stack alone, as an L1 dump has no module tree) for the pairing of
    calls within their parents."""
    rank_dir = os.path.dirname(data_dir) if data_dir else None
    out = {}
    for level in ("mix", "L1"):
        data = raw["data"] if level == "mix" else {
            k: v for k, v in raw["data"].items() if not k.startswith(module_prefix)}
        tensor = dict(raw, data=data, level=level)
        out[("tensor", level)] = table_from_dump(tensor, f"<tensor {level}>", data_dir)
        text = json.dumps(dict(tensor, task="statistics")).replace('"data_name"', '"_unused_data_name"')
        out[("statistics", level)] = table_from_dump(json.loads(text), f"<statistics {level}>", None)
        if rank_dir:
            files = (os.path.join(rank_dir, "construct.json") if level == "mix" else None,
                     os.path.join(rank_dir, "stack.json"))
            out[("tensor", level)].structure_files = out[("statistics", level)].structure_files = files
    return out


def graph_dirs(rank_dir, out_root, module_prefix="Module.", step=None):
    """{(mode, level): dump directory} of one tensor dump for graph compare, the same four variants as
    `variants` written to disk: tensor mix is the dump itself; statistics drops the tensor file names;
    L1 drops the module rows (`module_prefix`) and the module tree (an L1 dump has no construct). With `step`,
    each variant is `out_root/{mode}_{level}/step{step}/rank`, so a step is judged against the one before."""
    def read(name):
        path = os.path.join(rank_dir, name)
        if not os.path.exists(path):
            return {}
        with open(path) as handle:
            return json.load(handle)

    raw, construct, stack = read("dump.json"), read("construct.json"), read("stack.json")
    out = {}
    for level in ("mix", "L1"):
        data = raw["data"] if level == "mix" else {
            k: v for k, v in raw["data"].items() if not k.startswith(module_prefix)}
        tree = construct if level == "mix" else {}
        for mode in ("tensor", "statistics"):
            if (mode, level) == ("tensor", "mix"):
                out[(mode, level)] = rank_dir
                continue
            target = os.path.join(out_root, f"{mode}_{level}", *(() if step is None else (f"step{step}", "rank")))
            os.makedirs(target, exist_ok=True)
            document = dict(raw, data=data, level=level)
            text = json.dumps(document if mode == "tensor" else dict(document, task="statistics"))
            if mode == "tensor":
                data_dir = os.path.join(rank_dir, "dump_tensor_data")
                link = os.path.join(target, "dump_tensor_data")
                if os.path.isdir(data_dir) and not os.path.exists(link):
                    os.symlink(data_dir, link)
            else:
                text = text.replace('"data_name"', '"_unused_data_name"')
            for name, body in (("dump.json", text), ("construct.json", json.dumps(tree)),
                               ("stack.json", json.dumps(stack))):
                with open(os.path.join(target, name), "w") as handle:
                    handle.write(body)
            out[(mode, level)] = target
    return out
