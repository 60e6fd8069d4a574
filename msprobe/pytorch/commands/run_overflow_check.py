"""`msprobe -f pytorch run_overflow_check`: re-run the calls that overflowed in a dump, on CPU, and judge them."""

DESCRIPTION = "Re-run each API whose output overflowed in an overflow_check/tensor dump on CPU: normal or abnormal."


def add_arguments(parser):
    parser.add_argument("-api_info", "--api_info_file", dest="api_info", required=True,
                        help="dump.json of an overflow_check (or tensor / statistics) dump")
    parser.add_argument("-j", "--jit_compile", action="store_true",
                        help="NPU jit compilation (torch_npu only; no effect here)")
    parser.add_argument("-d", "--device", type=int, default=0,
                        help="device id: the calls are also re-run on cuda:N when CUDA is present (default 0)")
    parser.add_argument("-o", "--out_path", default="./",
                        help="folder for run_overflow_check_result_{timestamp}.csv (default ./)")


def run(args):
    import torch

    from msprobe.core.errors import UnsupportedError
    from msprobe.core.log import logger
    from msprobe.core.overflow.rerun import (judge_rerun, overflow_cases, overflow_tensor_dir, terminal_line,
                                             write_report, RerunRow)
    from msprobe.core.dump_paths import dump_json_of
    from msprobe.core.paths import make_dir
    from msprobe.core.run_ut.api_info import load_api_cases
    from msprobe.pytorch.api_accuracy_checker.arguments import build_call_args, flatten_tensors
    from msprobe.pytorch.api_accuracy_checker.executor import device_for
    from msprobe.pytorch.api_accuracy_checker.op_resolver import resolve_api
    from msprobe.pytorch.api_accuracy_checker.replay_guard import check_replayed_call

    dump_json = dump_json_of(args.api_info, what="-api_info")  # a dump.json or a folder holding one
    out_dir = make_dir(args.out_path, what="-o/--out_path")
    if args.jit_compile:
        logger.warning("run_overflow_check: -j/--jit_compile has no effect without torch_npu.")
    info = load_api_cases(dump_json)
    tensor_dir = info.tensor_dir or overflow_tensor_dir(dump_json)
    device = device_for(args.device)
    cases, rows = overflow_cases(info)
    if not cases and not rows:
        logger.warning(f"run_overflow_check: no forward API with an inf/nan output in {dump_json}.")

    def overflows(function, case, target, dtype_up):
        call = build_call_args(case.forward, case.name, tensor_dir, target, with_grad=False)
        if dtype_up:
            from msprobe.pytorch.api_accuracy_checker.arguments import bench_copy
            call = _float32_copy(bench_copy(call))
        else:  # sized on the meta device first: effects outside tensors and oversized outputs are refused
            check_replayed_call(function, call.args, call.kwargs, api_name=case.name)
        with torch.no_grad():
            output = function(*call.args, **call.kwargs)
        return any(isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(t).all())
                   for t in flatten_tensors(output))

    for case in cases:
        name = f"{case.name}.forward"
        try:
            function = resolve_api(case.prefix, case.api, warn=False)  # its row's line says why
            same = overflows(function, case, "cpu", False)
            wide = overflows(function, case, "cpu", True)
            on_device = overflows(function, case, device, False) if device != "cpu" else None
        except UnsupportedError as exc:
            rows.append(RerunRow(name, verdict="skipped", message=str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - one API failing must not stop the others
            rows.append(RerunRow(name, verdict="skipped", message=f"re-run failed: {type(exc).__name__}: {exc}"))
            continue
        row = judge_rerun(name, "real" if tensor_dir else "generated", same, wide, on_device)
        rows.append(row)
    order = {case.name + ".forward": case.index for case in info.cases}
    rows.sort(key=lambda row: order.get(row.api_name, 0))
    for row in rows:
        print(terminal_line(row))
    write_report(rows, out_dir)
    return 0


def _float32_copy(call):
    """bench_copy raises float32 to float64; the documented high-precision run is float32 (fp16/bf16 up)."""
    import torch

    def down(node):
        if isinstance(node, torch.Tensor) and node.dtype == torch.float64:
            return node.float()
        if isinstance(node, list):
            return [down(item) for item in node]
        if isinstance(node, dict):
            return {key: down(value) for key, value in node.items()}
        return node

    call.args, call.kwargs = down(call.args), down(call.kwargs)
    return call
