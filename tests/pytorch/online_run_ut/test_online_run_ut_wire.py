"""Wire format and device-side sending of online run_ut, in process: bad messages are refused before any
allocation or execution, tensors keep their layout, and a stuck or absent bench costs bounded memory."""
import io
import json
import struct
import threading

import pytest
import torch

from msprobe.core.errors import ParseError, UnsupportedError
from msprobe.core.run_ut.online import wire
from msprobe.core.run_ut.online.sender import CallSender
from msprobe.pytorch.online_run_ut.packing import pack_tensor, unpack_tensor


def _roundtrip(header, buffers=()):
    stream = io.BytesIO(b"".join(bytes(b) for b in wire.encode(header, buffers)))
    return wire.read_message(stream.readinto)


def test_tensors_keep_dtype_values_and_layout():
    tensors = {"t": torch.randn(4, 3, dtype=torch.bfloat16).t(), "s": torch.tensor(2.5, dtype=torch.float16),
               "e": torch.zeros(0, 2), "i": torch.arange(6).reshape(2, 3)[:, 1:].clone()}
    packed = [pack_tensor(value.clone(), name) for name, value in tensors.items()]
    message = _roundtrip({"kind": "call", "blobs": wire.blob_table([m for m, _ in packed])}, [b for _, b in packed])
    for name, value in tensors.items():
        meta, view = message.blobs[name]
        rebuilt = unpack_tensor(meta, view)
        assert rebuilt.dtype == value.dtype and torch.equal(rebuilt, value)
        assert rebuilt.stride() == value.clone().stride()
    assert message.blobs["t"][0]["stride"] == [1, 3]  # the transposed layout travelled


@pytest.mark.parametrize("frame, reason", [
    (struct.pack(">4sBIQ", b"XXXX", 1, 2, 0) + b"{}", "does not speak"),
    (struct.pack(">4sBIQ", b"MSRU", 9, 2, 0) + b"{}", "protocol version 9"),
    (struct.pack(">4sBIQ", b"MSRU", 1, 1 << 31, 0), "exceeds the limits"),
    (struct.pack(">4sBIQ", b"MSRU", 1, 0, 1 << 40), "exceeds the limits"),
    (struct.pack(">4sBIQ", b"MSRU", 1, 5, 0) + b"\x80abcd", "not JSON"),
    (struct.pack(">4sBIQ", b"MSRU", 1, 2, 0) + b"[]", "not a JSON object"),
    (struct.pack(">4sBIQ", b"MSRU", 1, 10, 4) + b"{}", "ended inside"),
])
def test_bad_frames_are_refused(frame, reason):
    with pytest.raises(ParseError, match=reason):
        wire.read_message(io.BytesIO(frame).readinto)


def _frame(header, payload=b""):
    text = json.dumps(header).encode()
    return struct.pack(">4sBIQ", b"MSRU", 1, len(text), len(payload)) + text + payload


@pytest.mark.parametrize("blob, reason", [
    ({"name": "x", "dtype": "torch.float32", "shape": [4], "stride": [1], "offset": 0, "nbytes": 64}, "past the end"),
    ({"name": "x", "dtype": "torch.float32", "shape": [-1], "stride": [1], "offset": 0, "nbytes": 4}, "bad shape"),
    ({"name": "x", "dtype": "torch.float32", "shape": [2], "stride": [1, 1], "offset": 0, "nbytes": 4}, "bad shape"),
    ({"name": "x", "shape": [1], "stride": [1], "offset": 0, "nbytes": 4}, "lacks its name or dtype"),
])
def test_bad_blob_tables_are_refused(blob, reason):
    with pytest.raises(ParseError, match=reason):
        wire.read_message(io.BytesIO(_frame({"kind": "call", "blobs": [blob]}, b"\0" * 16)).readinto)


def test_payload_not_covered_by_blobs_is_refused():
    with pytest.raises(ParseError, match="does not cover"):
        wire.read_message(io.BytesIO(_frame({"kind": "call", "blobs": []}, b"\0" * 8)).readinto)


def test_layout_past_the_bytes_and_unknown_dtypes_are_refused():
    meta = {"name": "x", "dtype": "torch.float32", "shape": [3, 3], "stride": [3, 1], "offset": 0, "nbytes": 16}
    with pytest.raises(ValueError, match="needs 36 bytes"):
        unpack_tensor(meta, memoryview(bytearray(16)))
    for dtype in ("os.system", "torch.nn", "__import__"):
        with pytest.raises(UnsupportedError, match="unknown tensor dtype"):
            unpack_tensor(dict(meta, dtype=dtype, shape=[1], stride=[1]), memoryview(bytearray(16)))


class _StuckChannel:
    """A bench that accepted the connection and then stopped reading."""
    address = "stuck"

    def __init__(self):
        self.release = threading.Event()
        self.sent = 0

    def send(self, buffers):
        self.release.wait()
        self.sent += 1

    def close(self):
        pass


def test_stuck_bench_bounds_memory_and_counts_drops(caplog):
    channel = _StuckChannel()
    sender = CallSender(lambda: channel, max_bytes=10_000, drain_s=0.3)
    accepted = [sender.submit([b"x" * 1000], 1000, is_call=True) for _ in range(50)]
    assert sender.queued_bytes <= 10_000
    assert accepted.count(True) <= 11 and accepted.count(False) >= 39
    channel.release.set()
    sent, dropped = sender.close()
    assert sent + dropped == 50 and dropped >= accepted.count(False)  # queued ones may miss the drain window
    assert channel.sent == sent


def test_unreachable_bench_warns_once_and_drops_without_waiting():
    def refuse():
        raise ConnectionRefusedError("Connection refused")

    sender = CallSender(refuse, max_bytes=1 << 20, retry_s=60)
    for _ in range(200):
        sender.submit([b"y" * 10], 10, is_call=True)
    sent, dropped = sender.close()
    assert (sent, dropped) == (0, 200)
    assert sender.warned
