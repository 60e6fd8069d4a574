"""Online run_ut transports: TCP (plain or TLS) and a shared directory, device side and bench side.

Device side (`open_channel`): `channel.send(buffers)` one encoded message, `channel.close()`. Errors are
OSError / ssl.SSLError / TransportError; the sender (sender.py) turns them into one log line.

Bench side: `TcpListener` accepts one connection per device process (a hello/ack exchange first: the bench
says whether it checks that rank), `DirWatcher` reads the message files of a shared folder. Both put
(rank, Message) pairs, and (rank, None) when a rank has finished, into the bench's queue.

Shared directory layout (nfs_path): `start_rank{r}_{ns}` when a device process starts sending,
`rank{r}_{seq:012d}.msg` per message (written under a temporary name, then renamed), `end_rank{r}_{ns}` after
its last message. The bench deletes each message file once read.
"""
import os
import re
import socket
import ssl
import threading
import time

from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger
from msprobe.core.run_ut.online import wire

__all__ = ["TransportError", "open_channel", "TcpListener", "DirWatcher", "TcpChannel", "DirChannel",
           "CONNECT_TIMEOUT"]

CONNECT_TIMEOUT = 5.0
_MESSAGE_FILE = re.compile(r"^rank(\d+)_(\d{12})\.msg$")
_MARKER_FILE = re.compile(r"^(start|end)_rank(\d+)_(\d+)$")


class TransportError(MsprobeError):
    """The bench side cannot be reached or refused this device process."""


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


# -- device side ----------------------------------------------------------------------------------
class TcpChannel:
    """A connection to the bench; `hello` tells it our rank, the bench's ack says whether it checks it."""

    def __init__(self, host, port, rank, tls_context=None, timeout=CONNECT_TIMEOUT):
        self.address = f"{host}:{port}"
        raw = socket.create_connection((host, port), timeout=timeout)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = tls_context.wrap_socket(raw) if tls_context is not None else raw
            self._send(wire.encode({"kind": "hello", "rank": rank, "pid": os.getpid()}))
            reply = wire.read_message(self.sock.recv_into)
        except BaseException:
            raw.close()
            raise
        if reply is None or reply.kind != "ack":
            self.sock.close()
            raise TransportError(f"the bench side at {self.address} closed the connection without an answer")
        if not reply.header.get("accepted"):
            self.sock.close()
            raise TransportError(f"the bench side at {self.address} does not check rank {rank}: "
                                 f"{reply.header.get('reason', '')}")
        self.sock.settimeout(None)  # sends may wait for a slow bench: the sender thread waits, not training

    def _send(self, buffers):
        for buffer in buffers:
            self.sock.sendall(buffer)

    def send(self, buffers):
        self._send(buffers)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_WR)
            self.sock.settimeout(CONNECT_TIMEOUT)
            self.sock.recv(1)  # the bench closes after reading everything: our last bytes arrived
        except OSError:
            pass
        finally:
            self.sock.close()


class DirChannel:
    """Messages as files of a shared folder; `pending_bytes()` says how much the bench has not read yet."""

    def __init__(self, folder, rank):
        if not os.path.isdir(folder):
            raise TransportError(f"nfs_path '{folder}' is not a directory")
        self.folder, self.rank, self.seq = folder, rank, 0
        self.address = folder
        self._marker("start")

    def _marker(self, kind):
        path = os.path.join(self.folder, f"{kind}_rank{self.rank}_{time.time_ns()}")
        with open(path, "w", encoding="utf-8"):
            pass

    def send(self, buffers):
        name = f"rank{self.rank}_{self.seq:012d}.msg"
        temporary = os.path.join(self.folder, f".{name}.{os.getpid()}.tmp")
        with open(temporary, "wb") as handle:
            for buffer in buffers:
                handle.write(buffer)
        os.replace(temporary, os.path.join(self.folder, name))
        self.seq += 1

    def pending_bytes(self):
        prefix = f"rank{self.rank}_"
        total = 0
        with os.scandir(self.folder) as entries:
            for entry in entries:
                if entry.name.startswith(prefix) and entry.name.endswith(".msg"):
                    try:
                        total += entry.stat().st_size
                    except OSError:
                        pass  # read and deleted by the bench meanwhile
        return total

    def close(self):
        self._marker("end")


def open_channel(section, rank, tls_context=None):
    """The device side's channel for a config section (nfs_path, else host/port)."""
    if section.get("nfs_path"):
        return DirChannel(section["nfs_path"], rank)
    host, port = section.get("host") or "", section.get("port", -1)
    if not host or not isinstance(port, int) or port <= 0:
        raise TransportError(f"online run_ut needs nfs_path or host and port (got host={host!r}, port={port})")
    return TcpChannel(host, port, rank, tls_context)


# -- bench side -----------------------------------------------------------------------------------
class TcpListener:
    """Accepts device connections on host:port; each connection's messages go to `deliver(rank, message)`
    and `deliver(rank, None)` when it ends. `accepts(rank)` -> '' or the reason a rank is not checked."""

    def __init__(self, host, port, deliver, accepts, tls_context=None):
        self.deliver, self.accepts, self.tls_context = deliver, accepts, tls_context
        self.server = socket.create_server((host or "127.0.0.1", port), reuse_port=False)
        self.port = self.server.getsockname()[1]
        self.closed = False
        self.thread = threading.Thread(target=self._accept_loop, name="msprobe-online-accept", daemon=True)
        self.thread.start()

    def _accept_loop(self):
        while not self.closed:
            try:
                conn, peer = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, peer), name="msprobe-online-conn", daemon=True).start()

    def _serve(self, conn, peer):
        where = f"{peer[0]}:{peer[1]}"
        rank = None
        try:
            conn.settimeout(CONNECT_TIMEOUT)
            if self.tls_context is not None:
                conn = self.tls_context.wrap_socket(conn, server_side=True)
            hello = wire.read_message(conn.recv_into)
            if hello is None or hello.kind != "hello" or not isinstance(hello.header.get("rank"), int):
                raise TransportError("no hello message")
            rank = hello.header["rank"]
            reason = self.accepts(rank)
            conn.sendall(b"".join(bytes(b) for b in wire.encode({"kind": "ack", "accepted": not reason,
                                                                  "reason": reason})))
            if reason:
                return
            conn.settimeout(None)
            logger.info("online run_ut: rank %d connected from %s", rank, where)
            while True:
                message = wire.read_message(conn.recv_into)
                if message is None:
                    break
                self.deliver(rank, message)
        except ssl.SSLError as exc:
            logger.warning("online run_ut: refused a connection from %s: TLS handshake failed (%s)", where,
                           getattr(exc, "reason", None) or _first_line(exc))
        except (OSError, MsprobeError) as exc:
            logger.warning("online run_ut: connection from %s%s lost: %s", where,
                           "" if rank is None else f" (rank {rank})", _first_line(exc))
        finally:
            try:
                conn.close()
            except OSError:
                pass
            if rank is not None and not self.accepts(rank):
                self.deliver(rank, None)

    def close(self):
        self.closed = True
        self.server.close()


class DirWatcher:
    """Reads the message files of a shared folder in order, for the ranks `accepts` allows; calls
    `deliver(rank, message)` and `deliver(rank, None)` after a rank's end marker and last message."""

    def __init__(self, folder, deliver, accepts, poll=0.02):
        if not os.path.isdir(folder):
            raise TransportError(f"nfs_path '{folder}' is not a directory")
        self.folder, self.deliver, self.accepts, self.poll = folder, deliver, accepts, poll
        self.closed = False
        self.started_ns = time.time_ns()
        self._remove_stale()
        self.thread = threading.Thread(target=self._loop, name="msprobe-online-watch", daemon=True)
        self.thread.start()

    def _remove_stale(self):
        """Markers and messages left by an earlier run would end this one at once: remove them."""
        stale = [name for name in os.listdir(self.folder) if _MARKER_FILE.match(name) or _MESSAGE_FILE.match(name)]
        for name in stale:
            os.remove(os.path.join(self.folder, name))
        if stale:
            logger.warning("online run_ut: removed %d files of an earlier run from %s", len(stale), self.folder)

    def _scan(self):
        messages, ended = [], set()
        for name in os.listdir(self.folder):
            match = _MESSAGE_FILE.match(name)
            if match:
                messages.append((int(match.group(1)), int(match.group(2)), name))
                continue
            match = _MARKER_FILE.match(name)
            if match and match.group(1) == "end":
                ended.add(int(match.group(2)))
        return sorted(messages), ended

    def _loop(self):
        finished = set()
        while not self.closed:
            messages, ended = self._scan()
            for rank, _, name in messages:
                if rank in finished:
                    continue
                path = os.path.join(self.folder, name)
                try:
                    if not self.accepts(rank):
                        with open(path, "rb") as handle:
                            message = wire.read_message(handle.readinto)
                        if message is not None:
                            self.deliver(rank, message)
                except (OSError, MsprobeError) as exc:
                    logger.warning("online run_ut: cannot read %s: %s", name, _first_line(exc))
                os.remove(path)
            pending = {rank for rank, _, _ in messages}
            for rank in sorted(ended - finished - pending):
                # a message renamed in after the scan, before the end marker, is read on the next pass
                if not any(_MESSAGE_FILE.match(n) and n.startswith(f"rank{rank}_") for n in os.listdir(self.folder)):
                    finished.add(rank)
                    for marker in os.listdir(self.folder):
                        found = _MARKER_FILE.match(marker)
                        if found and int(found.group(2)) == rank:
                            os.remove(os.path.join(self.folder, marker))
                    if not self.accepts(rank):
                        self.deliver(rank, None)
            if not messages:
                time.sleep(self.poll)

    def close(self):
        self.closed = True
