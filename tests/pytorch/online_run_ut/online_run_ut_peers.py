"""Hostile and honest peers of the online run_ut tests, speaking the wire format over raw sockets and files:
crafted frames, a real call message of F.relu, a bench that answers then stops reading. Loopback only."""
import json
import socket
import struct
import threading
import time

import torch

from msprobe.core.run_ut.online import wire
from msprobe.pytorch.online_run_ut.packing import pack_tensor


def frame(header, payload=b"", header_len=None, payload_len=None):
    """A message's bytes; `header_len` / `payload_len` override the declared lengths (crafted frames)."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    declared = (len(text) if header_len is None else header_len, len(payload) if payload_len is None else payload_len)
    return struct.pack(">4sBIQ", b"MSRU", 1, *declared) + text + payload


def hello(rank):
    return frame({"kind": "hello", "rank": rank, "pid": 1})


def relu_call(seq, name="Functional.relu.0", step=0):
    """(header, payload) of a real forward call of F.relu on a 2x3 tensor, no backward expected."""
    torch.manual_seed(seq)
    x = torch.randn(2, 3)
    y = torch.nn.functional.relu(x)
    x_meta, x_buf = pack_tensor(x.clone(), f"{name}.forward.input.0.pt")
    y_meta, y_buf = pack_tensor(y.clone(), f"{name}.forward.output.0.pt")

    def record(tensor, meta):
        return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": list(tensor.shape),
                "Max": float(tensor.max()), "Min": float(tensor.min()), "Mean": float(tensor.mean()),
                "Norm": float(tensor.norm()), "requires_grad": False, "data_name": meta["name"]}
    forward = {"input_args": [record(x, x_meta)], "input_kwargs": {}, "output": [record(y, y_meta)]}
    header = {"kind": "call", "rank": 0, "step": step, "name": name, "seq": seq, "forward": forward,
              "expects_backward": False, "blobs": wire.blob_table([x_meta, y_meta])}
    return header, bytes(x_buf) + bytes(y_buf)


def connect(port, timeout=10):
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return sock


def read_ack(sock):
    message = wire.read_message(sock.recv_into, wire.HANDSHAKE_LIMITS)
    assert message is not None and message.kind == "ack", message
    return message


def session(port, rank, frames, close=True):
    """Connect as `rank`, read the ack, send `frames`; the socket (open unless `close`)."""
    sock = connect(port)
    sock.sendall(hello(rank))
    assert read_ack(sock).header["accepted"]
    for data in frames:
        sock.sendall(data)
    if close:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(10)
        try:
            sock.recv(1)
        except OSError:
            pass
        sock.close()
    return sock


def rss_bytes(pid):
    """Resident memory of process `pid` now (VmRSS of /proc)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class RogueBench:
    """A listening socket on 127.0.0.1 that answers one connection's hello with `reply` bytes, then reads
    nothing until `drain()` (a bench that stopped reading) and keeps what it got."""

    def __init__(self, reply):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.reply, self.conn = reply, None
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        self.server.settimeout(30)
        try:
            self.conn, _ = self.server.accept()
        except OSError:
            return
        wire.read_message(self.conn.recv_into, wire.HANDSHAKE_LIMITS)
        self.conn.sendall(self.reply)
        self.ready.set()

    def drain(self, limit_s=30):
        """Everything the client sent after its hello, read until it closes (bounded in time)."""
        self.conn.settimeout(2)
        chunks, end = [], time.monotonic() + limit_s
        while time.monotonic() < end:
            try:
                data = self.conn.recv(1 << 20)
            except socket.timeout:
                break
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)

    def close(self):
        for sock in (self.conn, self.server):
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
