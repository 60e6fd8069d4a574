"""Bench side of online run_ut: received calls -> the cases offline run_ut reads from a dump -> its CSVs.

A "call" message carries a forward entry of dump.json (tensors named by data_name, their bytes in the
message); its "backward" message follows. A case is complete when its backward has arrived, when the device
side said none will come (no output requires grad), or at its step's end; complete cases run through the
framework's run_ut executor and are written in the order the calls arrived, which is dump.json's order, so
the files equal offline run_ut's on a tensor dump of the same calls. Per rank r, in `out_dir`:

    accuracy_checking_result_{ts}_rank{r}.csv / accuracy_checking_details_{ts}_rank{r}.csv
        each API re-run here in the device's dtypes, against the high-precision bench (offline run_ut's files)
    accuracy_checking_result_{ts}_rank{r}_device.csv / accuracy_checking_details_{ts}_rank{r}_device.csv
        the outputs the device computed during training, against the same bench
    api_precision_compare_result_{ts}_rank{r}.csv / api_precision_compare_details_{ts}_rank{r}.csv
        the new precision standards: the device's details judged against the re-run's (written at the end)

`runner(case) -> (outcome, device_outcome)` is the framework part (the Framework's `online_runner`;
PyTorch: msprobe/pytorch/online_run_ut/bench_ops.py).
"""
import os
import time
from dataclasses import dataclass, field

from msprobe.core.csv_cells import SafeCsvWriter
from msprobe.core.log import logger
from msprobe.core.naming import parse_name
from msprobe.core.paths import atomic_write_text, make_dir
from msprobe.core.precision.api_precision_compare import compare_details_csvs
from msprobe.core.run_ut.api_info import ApiCase, filter_by_lists
from msprobe.core.run_ut.online.wire import printable
from msprobe.core.run_ut.report import PYTORCH_LAYOUT, ResultWriter
from msprobe.core.run_ut.runner import skip_outcome

__all__ = ["OnlineCase", "OnlineBench", "FILTERED"]

FILTERED = "filtered out by white_list/black_list"


@dataclass
class OnlineCase(ApiCase):
    """An ApiCase whose tensors arrived in messages: `blobs` maps data_name -> (meta, bytes)."""
    blobs: dict = field(default_factory=dict)
    step: int = 0
    complete: bool = False


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _csv_line(cells):
    import io
    buffer = io.StringIO()
    SafeCsvWriter(buffer, lineterminator="\n").writerow(cells)
    return buffer.getvalue()


def _writer(out_dir, stamp, layout):
    """A ResultWriter appending to accuracy_checking_{result,details}_{stamp}.csv, created with their headers
    (through the writer's resume path: the file names carry the rank, which its own naming does not)."""
    result = os.path.join(out_dir, f"accuracy_checking_result_{stamp}.csv")
    details = os.path.join(out_dir, f"accuracy_checking_details_{stamp}.csv")
    atomic_write_text(result, _csv_line(layout.result_columns))
    atomic_write_text(details, _csv_line([title for _, title in layout.detail_keys]))
    return ResultWriter(out_dir, layout, resume_csv=result)


class _Rank:
    """One rank's cases in arrival order, its outcomes waiting for their turn, and its writers."""

    def __init__(self, out_dir, stamp, rank, layout):
        self.writer = _writer(out_dir, f"{stamp}_rank{rank}", layout)
        self.device_writer = _writer(out_dir, f"{stamp}_rank{rank}_device", layout)
        self.cases = {}       # seq -> OnlineCase still to run
        self.order = []       # seqs in arrival order, from `position` on still to write
        self.position = 0
        self.outcomes = {}    # seq -> (outcome, device outcome)
        self.finished = False
        self.late_warned = False


class OnlineBench:
    """Turns messages into run_ut outcomes; `handle(rank, message)`, `handle(rank, None)` when a rank ended."""

    def __init__(self, out_dir, runner, white_list=(), black_list=(), layout=PYTORCH_LAYOUT):
        self.out_dir = make_dir(out_dir, what="-o output directory")
        self.runner, self.layout = runner, layout
        self.white, self.black = list(white_list or ()), list(black_list or ())
        self.stamp = time.strftime("%Y%m%d%H%M%S")
        self.ranks = {}
        self.checked = 0

    def _rank(self, rank):
        if rank not in self.ranks:
            self.ranks[rank] = _Rank(self.out_dir, self.stamp, rank, self.layout)
            logger.info("online run_ut: rank %d results go to %s", rank, self.ranks[rank].writer.result_path)
        return self.ranks[rank]

    def handle(self, rank, message):
        state = self._rank(rank)
        kind = None if message is None else message.kind
        header = {} if message is None else message.header
        if state.writer is None:  # the rank ended and its files are written: a late peer changes nothing
            if message is not None and not state.late_warned:  # (None: its connection closing after "end")
                state.late_warned = True
                logger.warning("online run_ut: rank %d already ended; ignoring what arrives for it now", rank)
            return
        if kind == "call":
            self._add_call(state, header, message.blobs)
        elif kind == "backward":
            seq, backward = header.get("seq"), header.get("backward") or {}
            case = state.cases.get(seq) if _is_int(seq) else None
            if case is not None and case.name == header.get("name") and not case.complete \
                    and isinstance(backward, dict):
                case.backward = backward
                case.blobs.update(message.blobs)
                case.complete = True
        elif kind == "step_end":
            if _is_int(header.get("step")):
                for case in state.cases.values():
                    if case.step <= header["step"]:
                        case.complete = True
        elif kind in (None, "end"):
            for case in state.cases.values():
                case.complete = True
            state.finished = True
        self._run_complete(state)
        if state.finished and not state.cases:
            self._finish(rank, state)

    def _add_call(self, state, header, blobs):
        seq, name = header.get("seq"), header.get("name")
        parsed = parse_name(f"{name}.forward") if isinstance(name, str) else None
        forward, step = header.get("forward"), header.get("step", 0)
        if (not _is_int(seq) or seq in state.cases or parsed is None or not isinstance(forward, dict)
                or not _is_int(step)):
            logger.warning("online run_ut: ignored a malformed call message (%s)", printable(name, 80))
            return
        case = OnlineCase(name=parsed.call_name, prefix=parsed.prefix, api=parsed.api, forward=forward,
                          index=seq, blobs=dict(blobs), step=step,
                          complete=not header.get("expects_backward", True))
        state.cases[seq] = case
        state.order.append(seq)

    def _run_complete(self, state):
        for seq in [seq for seq, case in state.cases.items() if case.complete]:
            case = state.cases.pop(seq)
            _, blocked = filter_by_lists([case], self.white, self.black)
            if blocked:
                outcome = skip_outcome(case, FILTERED)
                state.outcomes[seq] = (outcome, outcome)
            else:
                state.outcomes[seq] = self.runner(case)
            case.blobs = {}
        while state.position < len(state.order) and state.order[state.position] in state.outcomes:
            outcome, device_outcome = state.outcomes.pop(state.order[state.position])
            state.writer.write(outcome)
            state.device_writer.write(device_outcome)
            state.position += 1
            self.checked += 1

    def _finish(self, rank, state):
        if state.writer is None:
            return
        for writer in (state.writer, state.device_writer):
            writer.close()
        result, details = compare_details_csvs(state.device_writer.details_path, state.writer.details_path,
                                               self.out_dir)
        for made, kind in ((result, "result"), (details, "details")):
            os.replace(made, os.path.join(self.out_dir, f"api_precision_compare_{kind}_{self.stamp}_rank{rank}.csv"))
        logger.info("online run_ut: rank %d done, %d APIs in %s", rank, state.position, state.writer.result_path)
        state.writer = None

    def done(self, ranks):
        """Whether every rank of `ranks` has ended and been written."""
        return all(rank in self.ranks and self.ranks[rank].writer is None for rank in ranks)

    def close(self):
        """Finish the ranks still open (the bench is stopped): write what is complete."""
        for rank, state in self.ranks.items():
            if state.writer is not None:
                for case in state.cases.values():
                    case.complete = True
                self._run_complete(state)
                self._finish(rank, state)
