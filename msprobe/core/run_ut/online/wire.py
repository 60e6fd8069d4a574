"""Online run_ut wire format: one message = a fixed frame header, a JSON header, raw tensor bytes.

    frame   ">4sBIQ": b"MSRU", version 1, JSON length, payload length
    header  UTF-8 JSON object: {"kind": "call" | "backward" | "step_end" | "end" | "hello" | "ack", ...,
            "blobs": [{"name", "dtype", "shape", "stride", "offset", "nbytes"}, ...]}
    payload the blobs' bytes one after another (each a tensor's whole storage, `offset`/`stride` in elements)

Nothing in a message is ever executed: the header is JSON, the tensors are raw bytes that the framework
reinterprets with the dtype named in the header (a dtype name is looked up, never evaluated). Sizes are
checked before anything is allocated, so a bad peer gets an error, not a huge allocation.
"""
import json
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

from msprobe.core.errors import ParseError

__all__ = ["MAGIC", "VERSION", "Message", "encode", "read_message", "FRAME", "MAX_HEADER", "MAX_PAYLOAD",
           "blob_table"]

MAGIC = b"MSRU"
VERSION = 1
FRAME = struct.Struct(">4sBIQ")
MAX_HEADER = 64 << 20
MAX_PAYLOAD = 8 << 30  # one API call's tensors; a bigger call is dropped on the device side


class Message:
    """A decoded message: its JSON header and its blobs as {name: (meta, memoryview)}."""
    __slots__ = ("header", "blobs", "size")

    def __init__(self, header: Dict[str, Any], blobs: Dict[str, Tuple[dict, memoryview]], size: int) -> None:
        self.header, self.blobs, self.size = header, blobs, size

    @property
    def kind(self) -> str:
        return self.header.get("kind", "")


def blob_table(metas: Sequence[dict]) -> List[dict]:
    """The header's blob list: (name, dtype, shape, stride, offset, nbytes) of each blob, in payload order."""
    keys = ("name", "dtype", "shape", "stride", "offset", "nbytes")
    return [{key: meta[key] for key in keys} for meta in metas]


def encode(header: Dict[str, Any], buffers: Sequence[Any] = ()) -> List[Any]:
    """The buffers to send for `header` (whose "blobs" describe `buffers`, in order)."""
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    payload = sum(memoryview(buffer).nbytes for buffer in buffers)
    return [FRAME.pack(MAGIC, VERSION, len(text), payload), text, *buffers]


def _check_blob(meta: Any, end: int) -> int:
    """Validate one blob entry; returns its byte length."""
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not isinstance(meta.get("dtype"), str):
        raise ParseError("online run_ut: a blob entry lacks its name or dtype")
    numbers = [meta.get("offset"), meta.get("nbytes"), *(meta.get("shape") or []), *(meta.get("stride") or [])]
    if (not isinstance(meta.get("shape"), list) or not isinstance(meta.get("stride"), list)
            or len(meta["shape"]) != len(meta["stride"])
            or any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in numbers)):
        raise ParseError(f"online run_ut: blob {meta['name'][:80]!r} has a bad shape/stride/offset/nbytes")
    if meta["nbytes"] > end:
        raise ParseError(f"online run_ut: blob {meta['name'][:80]!r} runs past the end of its message")
    return meta["nbytes"]


def decode(header_bytes: bytes, payload: bytearray) -> Message:
    """Message from the JSON header and the payload (blobs are views into `payload`)."""
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ParseError(f"online run_ut: a message header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ParseError("online run_ut: a message header is not a JSON object")
    view = memoryview(payload)
    blobs, position = {}, 0
    for meta in header.get("blobs") or []:
        length = _check_blob(meta, len(payload) - position)
        blobs[meta["name"]] = (meta, view[position:position + length])
        position += length
    if position != len(payload):
        raise ParseError("online run_ut: the blob table does not cover the message payload")
    return Message(header, blobs, len(header_bytes) + len(payload))


def _read_exactly(read_into, size: int) -> Optional[bytearray]:
    """`size` bytes through `read_into(memoryview) -> count` (0 at end of stream); None at a clean end."""
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        count = read_into(view[got:])
        if not count:
            if got == 0:
                return None
            raise ParseError(f"online run_ut: the stream ended inside a message ({got} of {size} bytes)")
        got += count
    return buffer


def read_message(read_into) -> Optional[Message]:
    """The next message of a stream (None at its end): `read_into(memoryview) -> bytes read` (socket.recv_into,
    file.readinto)."""
    frame = _read_exactly(read_into, FRAME.size)
    if frame is None:
        return None
    magic, version, header_len, payload_len = FRAME.unpack(frame)
    if magic != MAGIC:
        raise ParseError("online run_ut: the peer does not speak msprobe's online run_ut protocol")
    if version != VERSION:
        raise ParseError(f"online run_ut: protocol version {version}, this msprobe speaks {VERSION}: "
                         "install the same msprobe on both sides")
    if header_len > MAX_HEADER or payload_len > MAX_PAYLOAD:
        raise ParseError(f"online run_ut: a message of {header_len} + {payload_len} bytes exceeds the limits")
    header = _read_exactly(read_into, header_len) if header_len else bytearray()
    payload = _read_exactly(read_into, payload_len) if payload_len else bytearray()
    if header is None or payload is None:
        raise ParseError("online run_ut: the stream ended inside a message")
    return decode(bytes(header), payload)
