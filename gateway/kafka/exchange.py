"""One request on its way through the gateway, and the ordered slots its answer goes out in.

Owns: `Exchange` (what a request path needs to know of the request: key, version, correlation id,
the original header bytes to forward unchanged, the response-header shape, the quota subject) and
`ResponseQueue`, which writes answers to the client strictly in request order: Kafka clients match
responses by order, so an answer that is ready early waits for the ones before it (an answer
streamed to the client, a large Fetch's, is written as it arrives only while its slot is the
first: `first`; its slot is completed with no parts at its end). A throttled
answer mutes the client after it is written (KIP-219); for versions older than KIP-219 the answer
itself waits out the throttle first. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from brokers.wire.framing import size_prefix
from brokers.wire.headers import response_header
from gateway.kafka.services import QuotaSubject

Buffer = bytes | bytearray | memoryview


@dataclass(slots=True)
class Slot:
    parts: Sequence[Buffer] | None = None
    ready: bool = False
    throttle_ms: int = 0


@dataclass(slots=True)
class Exchange:
    api_key: int
    version: int
    correlation_id: int
    header: memoryview  # the request header as the client sent it (forwarded unchanged)
    flexible_response: bool
    subject: QuotaSubject | None
    started: float
    slot: Slot = field(default_factory=Slot)
    throttle_ms: int = 0

    def framed(self, body: Sequence[Buffer], body_size: int) -> list[Buffer]:
        """A response frame to the client: size prefix, response header, body parts."""
        head = response_header(self.correlation_id, self.flexible_response)
        return [size_prefix(len(head) + body_size) + head, *body]

    def request_frame(self, body: Sequence[Buffer], body_size: int) -> list[Buffer]:
        """A request frame upstream: the client's own header, then the rewritten body."""
        return [size_prefix(len(self.header) + body_size), self.header, *body]


class ResponseQueue:
    def __init__(
        self,
        write: Callable[[Sequence[Buffer]], None],
        mute: Callable[[int], None],
    ) -> None:
        self._write = write
        self._mute = mute
        self._slots: deque[Slot] = deque()

    def __len__(self) -> int:
        return len(self._slots)

    def reserve(self) -> Slot:
        slot = Slot()
        self._slots.append(slot)
        return slot

    def first(self, slot: Slot) -> bool:
        """`slot` is the oldest unanswered one: every answer before it has been written."""
        return bool(self._slots) and self._slots[0] is slot

    def complete(self, slot: Slot, parts: Sequence[Buffer] | None, *, delay_ms: int = 0) -> None:
        """The answer of `slot` (None: no answer, as for acks=0), written when its turn comes."""
        slot.parts = parts
        if delay_ms > 0:
            asyncio.get_running_loop().call_later(delay_ms / 1000, self._ready, slot)
        else:
            self._ready(slot)

    def _ready(self, slot: Slot) -> None:
        slot.ready = True
        slots = self._slots
        while slots and slots[0].ready:
            done = slots.popleft()
            if done.parts:
                self._write(done.parts)
            if done.throttle_ms > 0:
                self._mute(done.throttle_ms)

    def clear(self) -> None:
        self._slots.clear()
