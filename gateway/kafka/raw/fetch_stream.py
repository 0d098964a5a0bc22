"""A Fetch response (v4–18) rewritten for a tenant while it streams through, chunk by chunk.

Owns: `FetchStream`, fed the broker's response frame (after its size prefix) in chunks as they
are read, in order. It reads the response header and the body's head (throttle time, error and
session id, the topic count and the first topic's name) into small buffers; when the answer has
exactly one topic entry and that topic is the tenant's, it decides to stream (`Decision.stream`):
the client's frame size is known then (the broker's, less what the rename takes off the name), so
the renamed head goes out and everything after it is passed on as the broker's bytes (views of the
chunks, never copied), while a walk over the partitions' heads counts the record bytes delivered.
Anything else (several topic entries, a topic not the tenant's) is `Decision.buffer`: the caller
keeps every chunk and rewrites the whole answer the usual way (`raw.fetch_response`). Malformed
input raises `MalformedRequestError`; a wrong correlation id, `ConnectionError`. From v13
(KIP-516) the topic is its 16-byte id: `rename` is given the id's 32 hex digits and the id goes out
unchanged. From v16 the response's own tagged fields (`node_endpoints`, KIP-951: real brokers'
addresses) are not passed on, as the whole-answer rewrite drops them; since the client's frame size
was announced with the head, a non-empty section is replaced by one of the same size holding a
single tag no version defines (`PADDING_TAG`, zeros), which clients skip. `next_step`/`skip` let
the caller move a pass step's bytes itself (`gateway.kafka.splice_relay`). Pure (no I/O: the
caller writes the `out` parts); not thread-safe.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from brokers.wire.primitives import MalformedRequestError, write_uvarint
from brokers.wire.raw_reader import encode_string

FIRST_VERSION = 4
LAST_VERSION = 18
FIRST_FLEXIBLE_VERSION = 12
TOPIC_ID_VERSION = 13
NODE_ENDPOINTS_VERSION = 16
TOPIC_ID_SIZE = 16
PADDING_TAG = 127  # a top-level tag of the Fetch response no version defines (one varint byte)
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ABORTED_TRANSACTION = 16
_MAX_VARINT_BYTES = 5


class Decision(enum.Enum):
    UNDECIDED = "undecided"
    STREAM = "stream"  # `head` holds the renamed head; pass on the rest as it comes
    BUFFER = "buffer"  # not streamable: keep the whole answer and rewrite it the usual way


# What the walk asks for next: ("read", n) gives it exactly n bytes (copied into one buffer;
# headers only), ("pass", n) passes n bytes on untouched (views, never copied).
Step = tuple[str, int]
Walk = Generator[Step, memoryview | None, None]


@dataclass
class FetchStream:
    version: int
    correlation_id: int
    flexible_header: bool  # the response header has tagged fields (Fetch v12)
    size: int  # the broker's frame size (after the prefix)
    rename: Callable[[str], str | None]
    decision: Decision = Decision.UNDECIDED
    topic: str | None = None  # the tenant's name of the streamed topic
    head: bytes = b""  # the renamed body head, up to the first partition (set with STREAM)
    client_body_size: int = 0  # the body's size for the client (set with STREAM)
    record_bytes: int = 0  # record bytes seen so far (of the streamed topic)
    out: list[memoryview] = field(default_factory=list)  # bytes passed on, for the caller
    _walk: Walk | None = None
    _step: Step = ("read", 0)
    _pending: list[memoryview] = field(default_factory=list)
    _pending_bytes: int = 0
    _seen: int = 0  # bytes of the frame fed so far
    _muted: bool = False  # bytes read now are not passed on (the v16+ response tags)

    def __post_init__(self) -> None:
        if not FIRST_VERSION <= self.version <= LAST_VERSION:
            raise ValueError(f"Fetch v{self.version} is not streamed")
        self._walk = self._frame()
        self._step = next(self._walk)

    @property
    def done(self) -> bool:
        return self._seen == self.size and self._walk is None

    def feed(self, chunk: memoryview) -> None:
        """The next bytes of the frame. While streaming, what may be passed on is appended to
        `out` (the caller takes it); while undecided, nothing goes out."""
        self._seen += len(chunk)
        if self._seen > self.size:
            raise MalformedRequestError("more bytes fed than the frame holds")
        self._pending.append(chunk)
        self._pending_bytes += len(chunk)
        self._advance()
        if self._seen == self.size and self._walk is not None:
            raise MalformedRequestError("the Fetch response ended inside a field")

    def next_step(self) -> tuple[bool, int]:
        """What the walk wants next: (True, n) n bytes to pass on untouched (they may bypass
        `feed`: `skip`), (False, n) n more bytes it must read (`feed`); (False, 0) when done."""
        if self._walk is None:
            return False, 0
        kind, wanted = self._step
        if kind == "pass":
            return True, wanted - self._pending_bytes
        return False, wanted - self._pending_bytes

    def skip(self, count: int) -> None:
        """`count` bytes of the current pass step were delivered without being fed (spliced
        from socket to socket); nothing is added to `out` for them."""
        passing, wanted = self.next_step()
        if not passing or self._pending_bytes or not 0 < count <= wanted:
            raise ValueError(f"cannot skip {count} bytes at step {self._step}")
        self._seen += count
        self._step = ("pass", self._step[1] - count)
        self._advance()

    def take_out(self) -> list[memoryview]:
        """What may be passed on now (streaming), oldest first; `out` is emptied."""
        out, self.out = self.out, []
        return out

    # -- the driver ------------------------------------------------------------------------------
    def _advance(self) -> None:
        while self._walk is not None and self.decision is not Decision.BUFFER:
            kind, wanted = self._step
            if kind == "pass":
                if wanted > 0 and not self._pending_bytes:
                    return
                taken = self._take_views(wanted)
                self._step = ("pass", wanted - taken)
                if self._step[1] > 0:
                    return
                sent: memoryview | None = None
            else:
                if self._pending_bytes < wanted:
                    return
                sent = self._take(wanted)
                if self.decision is Decision.STREAM and not self._muted:
                    self.out.append(sent)
            try:
                self._step = self._walk.send(sent)
            except StopIteration:
                self._walk = None
        if self.decision is Decision.BUFFER:
            self._walk = None  # the caller keeps the chunks from here on
        elif self._walk is None and self._pending_bytes:
            raise MalformedRequestError(f"{self._pending_bytes} trailing bytes")

    def _take(self, size: int) -> memoryview:
        """`size` bytes from the pending chunks, as one buffer (a view when within one chunk)."""
        first = self._pending[0]
        if len(first) >= size:
            taken = first[:size]
            self._consume(size)
            return taken
        joined = bytearray()
        while len(joined) < size:
            chunk = self._pending[0]
            part = chunk[: size - len(joined)]
            joined += part
            self._consume(len(part))
        return memoryview(bytes(joined))

    def _take_views(self, size: int) -> int:
        """Pass on up to `size` pending bytes as views; how many."""
        taken = 0
        while taken < size and self._pending:
            chunk = self._pending[0]
            part = chunk[: size - taken]
            self.out.append(part)
            taken += len(part)
            self._consume(len(part))
        return taken

    def _consume(self, size: int) -> None:
        first = self._pending[0]
        self._pending_bytes -= size
        if size == len(first):
            self._pending.pop(0)
        else:
            self._pending[0] = first[size:]

    # -- the walk ----------------------------------------------------------------------------------
    def _frame(self) -> Walk:
        flexible = self.version >= FIRST_FLEXIBLE_VERSION
        header = yield ("read", 4)
        assert header is not None
        (correlation_id,) = _I32.unpack(header)
        if correlation_id != self.correlation_id:
            raise ConnectionError(
                f"response {correlation_id} out of order, expected {self.correlation_id}"
            )
        consumed = 4
        if self.flexible_header:
            consumed += yield from self._skip_tags()
        fixed = yield ("read", 10 if self.version >= 7 else 4)  # throttle, error and session id
        assert fixed is not None
        count_bytes, count = yield from self._length(flexible, wide=True)
        if count != 1:
            self.decision = Decision.BUFFER
            return
        name: str | None
        if self.version >= TOPIC_ID_VERSION:
            topic_id = yield ("read", TOPIC_ID_SIZE)
            assert topic_id is not None
            name_bytes, name = bytes(topic_id), bytes(topic_id).hex()
        else:
            name_bytes, name = yield from self._string(flexible)
        consumed += len(fixed) + len(count_bytes) + len(name_bytes)
        local = self.rename(name) if name is not None else None
        if local is None:
            self.decision = Decision.BUFFER
            return
        self.topic = local
        by_id = self.version >= TOPIC_ID_VERSION
        renamed = name_bytes if by_id else encode_string(local, flexible)
        no_throttle = _I32.pack(0)  # as the buffered rewrite writes it (the gateway's throttle
        # mutes the client after the answer instead)
        self.head = no_throttle + bytes(fixed[4:]) + bytes(count_bytes) + renamed
        self.client_body_size = self.size - consumed + len(self.head)
        self.decision = Decision.STREAM
        yield from self._partitions(flexible)
        if flexible:
            yield from self._skip_tags()  # the topic's
        if self.version >= NODE_ENDPOINTS_VERSION:
            self._muted = True
            size = yield from self._skip_tags()  # the response's: replaced
            self._muted = False
            self.out.append(memoryview(padding_tags(size)))
        elif flexible:
            yield from self._skip_tags()  # the response's

    def _partitions(self, flexible: bool) -> Walk:
        _raw, count = yield from self._length(flexible, wide=True)
        if count < 0:
            raise MalformedRequestError("null partitions in a Fetch response")
        fixed = 4 + 2 + 8 + 8 + (8 if self.version >= 5 else 0)
        for _ in range(count):
            yield ("read", fixed)
            _raw, aborted = yield from self._length(flexible, wide=True)
            for _ in range(max(aborted, 0)):
                yield ("read", _ABORTED_TRANSACTION)
                if flexible:
                    yield from self._skip_tags()
            if self.version >= 11:
                yield ("read", 4)  # the preferred read replica
            _raw, records = yield from self._length(flexible, wide=True)
            if records > 0:
                self.record_bytes += records
                yield ("pass", records)
            if flexible:
                yield from self._skip_tags()

    def _length(
        self, flexible: bool, *, wide: bool
    ) -> Generator[Step, memoryview | None, tuple[bytes, int]]:
        """A (compact) length or count: its bytes and its value (-1 for null)."""
        if not flexible:
            fixed = yield ("read", 4 if wide else 2)
            assert fixed is not None
            codec = _I32 if wide else _I16
            return bytes(fixed), int(codec.unpack(fixed)[0])
        raw, value = yield from self._uvarint()
        return raw, value - 1

    def _uvarint(self) -> Generator[Step, memoryview | None, tuple[bytes, int]]:
        raw = bytearray()
        result = shift = 0
        while True:
            if len(raw) >= _MAX_VARINT_BYTES:
                raise MalformedRequestError("varint too long")
            byte = yield ("read", 1)
            assert byte is not None
            raw += byte
            result |= (byte[0] & 0x7F) << shift
            if not byte[0] & 0x80:
                return bytes(raw), result
            shift += 7

    def _string(
        self, flexible: bool
    ) -> Generator[Step, memoryview | None, tuple[bytes, str | None]]:
        raw, size = yield from self._length(flexible, wide=False)
        if size < 0:
            return raw, None
        data = yield ("read", size)
        assert data is not None
        try:
            return raw + bytes(data), str(data, "utf-8")
        except UnicodeDecodeError:
            raise MalformedRequestError("topic name is not UTF-8") from None

    def _skip_tags(self) -> Generator[Step, memoryview | None, int]:
        """Past a tagged-field section, passed on as it is; its size."""
        raw, count = yield from self._uvarint()
        size = len(raw)
        for _ in range(count):
            tag, _value = yield from self._uvarint()
            length_raw, length = yield from self._uvarint()
            size += len(tag) + len(length_raw) + length
            if length:
                yield ("read", length)
        return size


def padding_tags(size: int) -> bytes:
    """A tagged-field section of exactly `size` bytes that carries nothing: no tags for 1 byte,
    else one `PADDING_TAG` (or tag 128, a byte longer, where the lengths' varints leave a gap)
    holding zeros."""
    if size == 1:
        return b"\x00"
    for tag in (PADDING_TAG, PADDING_TAG + 1):
        tag_bytes = write_uvarint(tag)
        for length_size in range(1, 6):
            length = size - 1 - len(tag_bytes) - length_size
            if length >= 0 and len(write_uvarint(length)) == length_size:
                return b"\x01" + tag_bytes + write_uvarint(length) + bytes(length)
    raise MalformedRequestError(f"no tagged-field section of {size} bytes")
