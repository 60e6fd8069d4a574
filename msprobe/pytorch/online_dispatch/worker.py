"""Worker process of online_dispatch: reads calls from a pipe, checks them, writes outcomes back.

Started by `WorkerPool` as `python -m msprobe.pytorch.online_dispatch.worker IN_FD OUT_FD BENCH_DTYPE
DUMP_DIR DUMP_FAILED` in a fresh interpreter (not fork: the training process may hold threads and
locks; not multiprocessing's spawn: it would re-import the user's training script). An empty message,
or the end of the pipe, ends it.
"""
import sys
from multiprocessing.connection import Connection

__all__ = ["serve", "main"]


def serve(in_fd: int, out_fd: int, bench_dtype: str, dump_dir: str, dump_failed: bool) -> None:
    import torch

    from msprobe.pytorch.online_dispatch.checker import SKIPPED, check_call
    from msprobe.pytorch.online_dispatch.op_call import call_from_payload, decode_message, encode_message

    torch.set_num_threads(1)  # one core per worker: process_num says how many cores checking may take
    try:  # this process is ours: let glibc reuse freed pages instead of faulting fresh ones for every op
        from msprobe.core.run_ut.runner import keep_freed_memory
        keep_freed_memory()
    except ImportError:
        pass
    inbox, outbox = Connection(in_fd, writable=False), Connection(out_fd, readable=False)
    while True:
        try:
            data = inbox.recv_bytes()
        except (EOFError, OSError):
            break
        if not data:
            break
        payload = decode_message(data)
        try:
            outcome = check_call(call_from_payload(payload), bench_dtype, dump_dir or None, dump_failed)
        except Exception as exc:  # a broken call is a row, the worker goes on
            outcome = {"summary": {"sequence": payload["sequence"], "Op Name": f"{payload['name']}_{payload['index']}",
                                   "Direction": payload["direction"], "Device Dtype": "", "Outputs Checked": 0,
                                   "Accuracy Reached or Not": "Skipped",
                                   "Message": f"{SKIPPED}: the worker could not rebuild or re-run this call "
                                              f"({type(exc).__name__}: {exc})"[:300]},
                       "details": [], "failed": False}
        outbox.send_bytes(encode_message(outcome))
    outbox.close()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    in_fd, out_fd, bench_dtype, dump_dir, dump_failed = argv
    serve(int(in_fd), int(out_fd), bench_dtype, dump_dir, dump_failed == "1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
