"""Device side of online run_ut: send encoded messages from a background thread, never failing training.

    sender = CallSender(open_channel_function, rank, max_bytes=512 << 20)
    sender.submit(buffers, nbytes, is_call=True)     # from the training thread: queue or drop, never blocks
    sender.close()                                   # at exit: drain (bounded wait), send the end, report

The queue holds at most `max_bytes` (env MSPROBE_ONLINE_QUEUE_MB); a message that does not fit is dropped and
counted. When the bench cannot be reached, refuses us, or goes away, the sender logs one warning and drops
what follows (retrying the connection every `retry_s` seconds); `close()` says how many calls were not sent.
"""
import collections
import os
import threading
import time

from msprobe.core.log import logger

__all__ = ["CallSender", "queue_limit_bytes"]

_JOIN_S = 5.0  # after the drain: how long the sender thread may take to notice the end


def queue_limit_bytes(default_mb=512):
    """Bytes the device side may hold for sending (MSPROBE_ONLINE_QUEUE_MB, default 512)."""
    try:
        return max(1, int(os.environ.get("MSPROBE_ONLINE_QUEUE_MB", default_mb))) << 20
    except ValueError:
        return default_mb << 20


def _first_line(exc):
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


class CallSender:
    """A bounded queue of messages and the thread that sends them through a channel."""

    def __init__(self, connect, max_bytes=None, retry_s=5.0, drain_s=60.0):
        self.connect = connect                    # () -> channel (raises when the bench is unreachable)
        self.max_bytes = max_bytes or queue_limit_bytes()
        self.retry_s, self.drain_s = retry_s, drain_s
        self.queue = collections.deque()
        self.queued_bytes = 0
        self.cond = threading.Condition()
        self.channel = None
        self.closing = False
        self.warned = False
        self.next_try = 0.0
        self.sent_calls = self.dropped_calls = self.dropped_other = 0
        self.busy = False
        self.next_spill_check = 0.0
        self.thread = threading.Thread(target=self._run, name="msprobe-online-sender", daemon=True)
        self.thread.start()

    # -- training thread ------------------------------------------------------------------------
    def submit(self, buffers, nbytes, is_call):
        """Queue one message; False (and counted) when it cannot be kept."""
        with self.cond:
            if self.closing or self.queued_bytes + nbytes > self.max_bytes or self._unreachable():
                self._count_drop(is_call)
                if self.queued_bytes + nbytes > self.max_bytes:
                    self._warn_once(f"the send queue is full ({self.max_bytes >> 20} MiB): the bench side is "
                                    "slower than training; calls are dropped (MSPROBE_ONLINE_QUEUE_MB raises the limit)")
                return False
            self.queue.append((buffers, nbytes, is_call))
            self.queued_bytes += nbytes
            self.cond.notify()
            return True

    def _unreachable(self):
        return self.channel is None and self.warned and time.monotonic() < self.next_try

    def _count_drop(self, is_call):
        if is_call:
            self.dropped_calls += 1
        else:
            self.dropped_other += 1

    def _warn_once(self, text):
        if not self.warned:
            self.warned = True
            logger.warning(f"msprobe online run_ut: {text}; training goes on, unchecked calls are counted.")

    # -- sender thread --------------------------------------------------------------------------
    def _run(self):
        while True:
            with self.cond:
                while not self.queue and not self.closing:
                    self.cond.wait()
                if not self.queue and self.closing:
                    return
                buffers, nbytes, is_call = self.queue.popleft()
                self.busy = True
            try:
                self._send(buffers, is_call)
            finally:
                with self.cond:
                    self.queued_bytes -= nbytes
                    self.busy = False
                    self.cond.notify_all()

    def _send(self, buffers, is_call):
        if self.channel is None and not self._connect():
            with self.cond:
                self._count_drop(is_call)
            return
        if self._folder_full():
            with self.cond:
                self._count_drop(is_call)
            return
        try:
            self.channel.send(buffers)
            if is_call:
                self.sent_calls += 1
        except Exception as exc:  # noqa: BLE001 - a lost bench must never reach the training script
            self._lost(f"lost the bench side at {getattr(self.channel, 'address', '?')} ({_first_line(exc)})")
            with self.cond:
                self._count_drop(is_call)

    def _folder_full(self):
        """Shared directory: whether the bench has left more than max_bytes unread (checked once a second)."""
        pending = getattr(self.channel, "pending_bytes", None)
        if pending is None or time.monotonic() < self.next_spill_check:
            return False
        self.next_spill_check = time.monotonic() + 1.0
        if pending() <= self.max_bytes:
            return False
        with self.cond:
            self._warn_once(f"the shared directory holds over {self.max_bytes >> 20} MiB that the bench side has "
                            "not read; calls are dropped until it catches up")
        return True

    def _connect(self):
        if time.monotonic() < self.next_try:
            return False
        try:
            self.channel = self.connect()
            return True
        except Exception as exc:  # noqa: BLE001 - unreachable bench: logged once, training goes on
            self._lost(f"cannot reach the bench side ({_first_line(exc)})")
            return False

    def _lost(self, text):
        channel, self.channel = self.channel, None
        if channel is not None:
            try:
                channel.sock.close() if hasattr(channel, "sock") else None
            except OSError:
                pass
        self.next_try = time.monotonic() + self.retry_s
        with self.cond:
            self._warn_once(text)

    # -- exit -------------------------------------------------------------------------------------
    def close(self, end_buffers=None):
        """Send what is queued (waiting at most `drain_s` without progress), then the end message, then
        report the counts. Returns (sent calls, calls not sent). A bench that stopped reading costs `drain_s`
        and a few seconds, not more: a send stuck past the drain is aborted, and the end message goes out only
        when no message is half-sent (it would land inside that message's bytes)."""
        with self.cond:
            last, left = time.monotonic(), len(self.queue)
            while (self.queue or self.busy) and time.monotonic() - last < self.drain_s:
                self.cond.wait(0.5)
                if len(self.queue) != left:
                    last, left = time.monotonic(), len(self.queue)
            while self.queue:
                _, nbytes, is_call = self.queue.popleft()
                self.queued_bytes -= nbytes
                self._count_drop(is_call)
            stuck = self.busy
            self.closing = True
            self.cond.notify_all()
        channel = self.channel
        if stuck and channel is not None and hasattr(channel, "abort"):
            channel.abort()  # the bench stopped reading: the stuck send raises instead of holding exit
        self.thread.join(timeout=_JOIN_S)
        if self.thread.is_alive() or stuck:
            self._lost("the bench side stopped reading; the message in progress and the end were not sent")
        elif self.channel is not None:
            try:
                if end_buffers is not None:
                    self.channel.send(end_buffers)
                self.channel.close()
            except Exception as exc:  # noqa: BLE001
                self._lost(f"lost the bench side at the end ({_first_line(exc)})")
        if self.dropped_calls or self.dropped_other:
            logger.warning(f"msprobe online run_ut: {self.dropped_calls} calls (and {self.dropped_other} backward "
                           f"entries) were not checked; {self.sent_calls} calls were sent to the bench side.")
        else:
            logger.info(f"msprobe online run_ut: {self.sent_calls} calls sent to the bench side.")
        return self.sent_calls, self.dropped_calls
