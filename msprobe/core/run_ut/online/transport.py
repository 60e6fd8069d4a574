"""Online run_ut transports: TCP (plain or TLS) and a shared directory, device side and bench side.

Device side (`open_channel`): `channel.send(buffers)` one encoded message, `channel.close()`. Errors are
OSError / ssl.SSLError / TransportError; the sender (sender.py) turns them into one log line.

Bench side: `TcpListener` accepts one connection per device process (a hello/ack exchange first: the bench
says whether it checks that rank), `DirWatcher` reads the message files of a shared folder. Both put
(rank, Message) pairs, and (rank, None) when a rank has finished, into the bench's queue.

Shared directory layout (nfs_path): `start_rank{r}_{ns}` when a device process starts sending,
`rank{r}_{seq:012d}.msg` per message (written under a temporary name, then renamed), `end_rank{r}_{ns}` after
its last message. The bench deletes each message file once read. Every file is created with
O_CREAT|O_EXCL|O_NOFOLLOW and mode 0640 (a planted symlink is refused, not followed); the bench opens message
files with O_NOFOLLOW|O_NONBLOCK and reads regular files only (a directory or a FIFO is a warning, not a hang).

Limits on the bench side: at most MAX_CONNECTIONS connections at once, a hello within CONNECT_TIMEOUT and
of wire.HANDSHAKE_LIMITS size; a message file's declared lengths must match its size.
"""
import ipaddress
import os
import re
import socket
import ssl
import stat
import threading
import time

from msprobe.core.errors import MsprobeError
from msprobe.core.log import logger
from msprobe.core.run_ut.online import wire

__all__ = ["TransportError", "open_channel", "TcpListener", "DirWatcher", "TcpChannel", "DirChannel",
           "CONNECT_TIMEOUT", "MAX_CONNECTIONS", "FILE_MODE", "is_loopback", "check_plain_tcp"]

CONNECT_TIMEOUT = 5.0
MAX_CONNECTIONS = 64
FILE_MODE = 0o640
_MESSAGE_FILE = re.compile(r"^rank(\d+)_(\d{12})\.msg$")
_MARKER_FILE = re.compile(r"^(start|end)_rank(\d+)_(\d+)$")


class TransportError(MsprobeError):
    """The bench side cannot be reached or refused this device process."""


def _first_line(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {wire.printable(text[0] if text else '', 300)}"


def is_loopback(host) -> bool:
    """Whether `host` is this machine only: "localhost", 127.0.0.0/8 or ::1 (names are not resolved)."""
    if str(host).lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(str(host)).is_loopback
    except ValueError:
        return False


def check_plain_tcp(host, tls, allow_plain_tcp, where):
    """Refuse plain TCP to or on a host other than loopback unless `allow_plain_tcp` says so; returns the
    mode's name for the start-up line ("TLS", "plain TCP", "plain TCP on loopback")."""
    if tls:
        return "TLS"
    if is_loopback(host):
        return "plain TCP on loopback"
    if not allow_plain_tcp:
        raise TransportError(f"{where}: host {wire.printable(host, 80)} is not loopback and no TLS files are "
                             "configured: set tls_path (see docs/online_run_ut.md), or set "
                             '"allow_plain_tcp": true to send unauthenticated, unencrypted traffic on purpose.')
    return "plain TCP (allow_plain_tcp: unauthenticated and unencrypted)"


def _create_private(path, binary=True):
    """A new file at `path`: O_EXCL|O_NOFOLLOW, so a symlink or a file planted there is refused; mode 0640."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        os.fchmod(descriptor, FILE_MODE)  # whatever the umask
    except OSError:
        os.close(descriptor)
        raise
    return os.fdopen(descriptor, "wb" if binary else "w")


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
            reply = wire.read_message(self.sock.recv_into, wire.HANDSHAKE_LIMITS)
        except BaseException:
            raw.close()
            raise
        if reply is None or reply.kind != "ack":
            self.sock.close()
            raise TransportError(f"the bench side at {self.address} closed the connection without an answer")
        if not reply.header.get("accepted"):
            self.sock.close()
            raise TransportError(f"the bench side at {self.address} does not check rank {rank}: "
                                 f"{wire.printable(reply.header.get('reason', ''))}")
        self.sock.settimeout(None)  # sends may wait for a slow bench: the sender thread waits, not training

    def _send(self, buffers):
        for buffer in buffers:
            self.sock.sendall(buffer)

    def send(self, buffers):
        self._send(buffers)

    def abort(self):
        """Unblock a send in progress on another thread (it raises OSError); the connection is over."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

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
        with _create_private(path):
            pass

    def send(self, buffers):
        name = f"rank{self.rank}_{self.seq:012d}.msg"
        temporary = os.path.join(self.folder, f".{name}.{os.getpid()}.tmp")
        try:
            handle = _create_private(temporary)
        except FileExistsError:
            raise TransportError(f"'{temporary}' already exists (a planted file or symbolic link?): "
                                 "not written") from None
        try:
            with handle:
                for buffer in buffers:
                    handle.write(buffer)
        except BaseException:
            os.unlink(temporary)
            raise
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
    check_plain_tcp(host, tls_context is not None, section.get("allow_plain_tcp", False), "online run_ut")
    return TcpChannel(host, port, rank, tls_context)


# -- bench side -----------------------------------------------------------------------------------
class TcpListener:
    """Accepts device connections on host:port; each connection's messages go to `deliver(rank, message)`
    and `deliver(rank, None)` when it ends. `accepts(rank)` -> '' or the reason a rank is not checked."""

    def __init__(self, host, port, deliver, accepts, tls_context=None, max_connections=MAX_CONNECTIONS):
        self.deliver, self.accepts, self.tls_context = deliver, accepts, tls_context
        self.server = socket.create_server((host or "127.0.0.1", port), reuse_port=False)
        self.port = self.server.getsockname()[1]
        self.closed = False
        self.max_connections = max_connections
        self.slots = threading.BoundedSemaphore(max_connections)
        self.thread = threading.Thread(target=self._accept_loop, name="msprobe-online-accept", daemon=True)
        self.thread.start()

    def _accept_loop(self):
        while not self.closed:
            try:
                conn, peer = self.server.accept()
            except OSError:
                return
            if not self.slots.acquire(blocking=False):
                logger.warning("online run_ut: refused a connection from %s:%s: %d connections are open already",
                               peer[0], peer[1], self.max_connections)
                conn.close()
                continue
            threading.Thread(target=self._serve_counted, args=(conn, peer), name="msprobe-online-conn",
                             daemon=True).start()

    def _serve_counted(self, conn, peer):
        try:
            self._serve(conn, peer)
        finally:
            self.slots.release()

    @staticmethod
    def _hello(conn):
        """The rank of the hello that opens a connection (small, within CONNECT_TIMEOUT)."""
        hello = wire.read_message(conn.recv_into, wire.HANDSHAKE_LIMITS)
        rank = None if hello is None else hello.header.get("rank")
        if hello is None or hello.kind != "hello" or isinstance(rank, bool) or not isinstance(rank, int):
            raise TransportError("no hello message")
        return rank

    def _serve(self, conn, peer):
        where = f"{peer[0]}:{peer[1]}"
        rank, delivered = None, 0
        try:
            conn.settimeout(CONNECT_TIMEOUT)
            if self.tls_context is not None:
                conn = self.tls_context.wrap_socket(conn, server_side=True)
            rank = self._hello(conn)
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
                delivered += 1
        except ssl.SSLError as exc:
            logger.warning("online run_ut: refused a connection from %s: TLS handshake failed (%s)", where,
                           wire.printable(getattr(exc, "reason", None) or _first_line(exc)))
        except (OSError, MsprobeError) as exc:
            logger.warning("online run_ut: connection from %s%s lost: %s", where,
                           "" if rank is None else f" (rank {rank})", _first_line(exc))
        finally:
            try:
                conn.close()
            except OSError:
                pass
            # a device process sends a message after its hello, always: a connection that sent none did not
            # run training here, and must not end the rank's checking
            if rank is not None and delivered and not self.accepts(rank):
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
        self.skipped = set()  # names that cannot be removed (a folder named like a message)
        self.started_ns = time.time_ns()
        self._remove_stale()
        self.thread = threading.Thread(target=self._loop, name="msprobe-online-watch", daemon=True)
        self.thread.start()

    def _remove_stale(self):
        """Markers and messages left by an earlier run would end this one at once: remove them."""
        stale = [name for name in os.listdir(self.folder) if _MARKER_FILE.match(name) or _MESSAGE_FILE.match(name)]
        removed = sum(self._remove(name) for name in stale)
        if removed:
            logger.warning("online run_ut: removed %d files of an earlier run from %s", removed, self.folder)

    def _remove(self, name):
        """Delete a file of the folder; a folder or an undeletable entry is reported once and then skipped."""
        try:
            os.remove(os.path.join(self.folder, name))
            return True
        except OSError as exc:
            if name not in self.skipped:
                self.skipped.add(name)
                logger.warning("online run_ut: cannot remove %s from the shared folder, ignoring it: %s",
                               wire.printable(name), _first_line(exc))
            return False

    def _read(self, name):
        """The message in file `name`: a regular file (no symlink, FIFO or folder) whose size is what its
        frame declares."""
        path = os.path.join(self.folder, name)
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            os.close(descriptor)
            raise TransportError("not a regular file")
        with os.fdopen(descriptor, "rb") as handle:
            frame = handle.read(wire.FRAME.size)
            if len(frame) == wire.FRAME.size:
                _, _, header_len, payload_len = wire.FRAME.unpack(frame)
                if wire.FRAME.size + header_len + payload_len != info.st_size:
                    raise TransportError(f"its frame declares {header_len} + {payload_len} bytes, the file holds "
                                         f"{info.st_size}")
            handle.seek(0)
            return wire.read_message(handle.readinto)

    def _scan(self):
        messages, ended = [], set()
        for name in os.listdir(self.folder):
            if name in self.skipped:
                continue
            match = _MESSAGE_FILE.match(name)
            if match:
                messages.append((int(match.group(1)), int(match.group(2)), name))
                continue
            match = _MARKER_FILE.match(name)
            if match and match.group(1) == "end":
                ended.add(int(match.group(2)))
        return sorted(messages), ended

    def _take(self, rank, name):
        """Read, deliver and delete one message file; a bad one costs a warning line."""
        try:
            if not self.accepts(rank):
                message = self._read(name)
                if message is not None:
                    self.deliver(rank, message)
        except (OSError, MsprobeError) as exc:
            logger.warning("online run_ut: cannot read %s: %s", wire.printable(name), _first_line(exc))
        self._remove(name)

    def _loop(self):
        finished = set()
        while not self.closed:
            messages, ended = self._scan()
            for rank, _, name in messages:
                if rank not in finished:
                    self._take(rank, name)
            pending = {rank for rank, _, _ in messages}
            for rank in sorted(ended - finished - pending):
                # a message renamed in after the scan, before the end marker, is read on the next pass
                if not any(_MESSAGE_FILE.match(n) and n.startswith(f"rank{rank}_") and n not in self.skipped
                           for n in os.listdir(self.folder)):
                    finished.add(rank)
                    for marker in os.listdir(self.folder):
                        found = _MARKER_FILE.match(marker)
                        if found and int(found.group(2)) == rank:
                            self._remove(marker)
                    if not self.accepts(rank):
                        self.deliver(rank, None)
            if not [m for m in messages if m[0] not in finished]:
                time.sleep(self.poll)

    def close(self):
        self.closed = True
