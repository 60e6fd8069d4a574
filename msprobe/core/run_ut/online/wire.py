"""Online run_ut wire format: one message = a fixed frame header, a JSON header, raw tensor bytes.

    frame   ">4sBIQ": b"MSRU", version 1, JSON length, payload length
    header  UTF-8 JSON object: {"kind": "call" | "backward" | "step_end" | "end" | "hello" | "ack", ...,
            "blobs": [{"name", "dtype", "shape", "stride", "offset", "nbytes"}, ...]}
    payload the blobs' bytes one after another (each a tensor's whole storage, `offset`/`stride` in elements)

Nothing in a message is ever executed: the header is JSON, the tensors are raw bytes that the framework
reinterprets with the dtype named in the header (a dtype name is looked up, never evaluated). Memory follows
the bytes that actually arrive, never the lengths a frame declares: a message is read into a buffer that grows
as its bytes come (a 17-byte frame declaring 8 GiB costs kilobytes), the caller caps the lengths (`limits`:
small before a hello, MAX_HEADER / MAX_PAYLOAD after), and a blob's element count may not exceed its bytes
(a shape of [8192, 8192] with zero strides over 4 bytes is refused).
"""
import json
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

from msprobe.core.errors import ParseError

__all__ = ["MAGIC", "VERSION", "Message", "encode", "read_message", "FRAME", "MAX_HEADER", "MAX_PAYLOAD",
           "blob_table", "HANDSHAKE_LIMITS", "MAX_DIMS", "printable"]

MAGIC = b"MSRU"
VERSION = 1
FRAME = struct.Struct(">4sBIQ")
MAX_HEADER = 64 << 20
MAX_PAYLOAD = 8 << 30  # one API call's tensors; a bigger call is dropped on the device side
HANDSHAKE_LIMITS = (4096, 0)  # (header, payload) bytes of a hello or an ack: a few small JSON fields
MAX_DIMS = 64
_FIRST_CHUNK = 1 << 20  # a buffer starts at 1 MiB at most and doubles as bytes arrive
_ZEROS = memoryview(bytes(16 << 20))  # calloc'd: pages are only mapped to the zero page when read


def printable(text, limit=120) -> str:
    """`text` made safe for one log line: control characters escaped, cut to `limit` characters."""
    text = str(text)[:limit]
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


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
    if len(meta["shape"]) > MAX_DIMS:
        raise ParseError(f"online run_ut: blob {meta['name'][:80]!r} has more than {MAX_DIMS} dimensions")
    elements = 1
    for size in meta["shape"]:
        elements *= size
        if elements > meta["nbytes"]:  # every element takes a byte at least: zero strides would amplify
            raise ParseError(f"online run_ut: blob {meta['name'][:80]!r} declares more elements than its "
                             f"{meta['nbytes']} bytes hold")
    return meta["nbytes"]


def decode(header_bytes: bytes, payload: bytearray) -> Message:
    """Message from the JSON header and the payload (blobs are views into `payload`)."""
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ParseError(f"online run_ut: a message header is not JSON ({exc})") from None
    except RecursionError:
        raise ParseError("online run_ut: a message header is nested too deeply") from None
    if not isinstance(header, dict):
        raise ParseError("online run_ut: a message header is not a JSON object")
    if not isinstance(header.get("blobs") or [], list):
        raise ParseError("online run_ut: a message's blob table is not a list")
    view = memoryview(payload)
    blobs, position = {}, 0
    for meta in header.get("blobs") or []:
        length = _check_blob(meta, len(payload) - position)
        blobs[meta["name"]] = (meta, view[position:position + length])
        position += length
    if position != len(payload):
        raise ParseError("online run_ut: the blob table does not cover the message payload")
    return Message(header, blobs, len(header_bytes) + len(payload))


def _grow(buffer: bytearray, count: int) -> None:
    """Append `count` zero bytes (from one shared zero block: no temporary allocation per step)."""
    while count > 0:
        step = min(count, len(_ZEROS))
        buffer += _ZEROS[:step]
        count -= step


def _read_exactly(read_into, size: int) -> Optional[bytearray]:
    """`size` bytes through `read_into(memoryview) -> count` (0 at end of stream); None at a clean end.
    The buffer grows with the bytes received, so a declared size costs nothing until it is sent."""
    buffer = bytearray(min(size, _FIRST_CHUNK))
    got = 0
    while got < size:
        if got == len(buffer):
            _grow(buffer, min(size, 2 * len(buffer)) - len(buffer))
        with memoryview(buffer) as view:
            count = read_into(view[got:])
        if not count:
            if got == 0:
                return None
            raise ParseError(f"online run_ut: the stream ended inside a message ({got} of {size} bytes)")
        got += count
    return buffer


def read_message(read_into, limits: Tuple[int, int] = (MAX_HEADER, MAX_PAYLOAD)) -> Optional[Message]:
    """The next message of a stream (None at its end): `read_into(memoryview) -> bytes read` (socket.recv_into,
    file.readinto). `limits`: the largest (header, payload) accepted, e.g. HANDSHAKE_LIMITS before a hello."""
    frame = _read_exactly(read_into, FRAME.size)
    if frame is None:
        return None
    magic, version, header_len, payload_len = FRAME.unpack(frame)
    if magic != MAGIC:
        raise ParseError("online run_ut: the peer does not speak msprobe's online run_ut protocol")
    if version != VERSION:
        raise ParseError(f"online run_ut: protocol version {version}, this msprobe speaks {VERSION}: "
                         "install the same msprobe on both sides")
    if header_len > limits[0] or payload_len > limits[1]:
        raise ParseError(f"online run_ut: a message of {header_len} + {payload_len} bytes exceeds the limits "
                         f"({limits[0]} + {limits[1]})")
    header = _read_exactly(read_into, header_len) if header_len else bytearray()
    payload = _read_exactly(read_into, payload_len) if payload_len else bytearray()
    if header is None or payload is None:
        raise ParseError("online run_ut: the stream ended inside a message")
    return decode(bytes(header), payload)
