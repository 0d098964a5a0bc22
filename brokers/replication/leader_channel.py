"""A replica fetcher's own connection to its leader: one request at a time, each response frame
read from the socket straight into one buffer kept for the connection's life.

Owns: `LeaderChannel`, an `asyncio.BufferedProtocol`. Why not the client's `BrokerConnection`:
for every 1 MiB fetch answer it allocates afresh (each socket read as `bytes`, a growing
`bytearray`, the records copied out by kio), and on this VM first-touched memory costs more
kernel time than the copies (measured ~1.1 ms per MiB, on the acks=all critical path). Here
the socket is read with `recv_into` the reused buffer and `fetch_answer` slices records out of
it. No ApiVersions exchange: the fetcher's two requests are sent at fixed versions
(`fetch_answer.FETCH_VERSION`, OffsetForLeaderEpoch v3), as Kafka's inter-broker protocol
version fixes them.

Contract: one request in flight (the fetcher's rounds are sequential); the frame returned by
`call` — and every view into it — is valid only until the next `call`, which reuses the buffer.
Failures (connect, timeout, a broken or closed stream) raise `ClientError` subclasses and leave
the channel closed. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import struct
from typing import cast

from brokers.client.errors import (
    BrokerConnectionError,
    ConnectionClosedError,
    ProtocolViolationError,
    RequestTimeoutError,
    ResponseTooLargeError,
)

INITIAL_BUFFER = 1 << 20  # replica.fetch.max.bytes; grows to the largest frame seen
_PREFIX = 4
_DISCARD = 4096
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length


class LeaderChannel(asyncio.BufferedProtocol):
    def __init__(self, address: str, *, client_id: str, max_frame_bytes: int) -> None:
        self.address = address
        self._client_id = client_id.encode()
        self._max_frame = max_frame_bytes
        self._buffer = bytearray(INITIAL_BUFFER)
        self._filled = 0  # bytes of the current frame received, size prefix included
        self._frame_end: int | None = None  # prefix + frame size, once the prefix is in
        self._waiter: asyncio.Future[memoryview] | None = None
        self._transport: asyncio.Transport | None = None
        self._failure: BrokerConnectionError | None = None
        self._correlation = 0

    @classmethod
    async def connect(
        cls, host: str, port: int, *, client_id: str, timeout_s: float, max_frame_bytes: int
    ) -> LeaderChannel:
        loop = asyncio.get_running_loop()
        address = f"{host}:{port}"
        channel = cls(address, client_id=client_id, max_frame_bytes=max_frame_bytes)
        try:
            async with asyncio.timeout(timeout_s):
                await loop.create_connection(lambda: channel, host, port)
        except (OSError, TimeoutError) as exc:
            raise ConnectionClosedError(f"{address}: cannot connect: {exc!r}") from None
        return channel

    @property
    def closed(self) -> bool:
        return self._failure is not None or self._transport is None

    async def call(
        self, api_key: int, version: int, body: bytes, *, flexible: bool, timeout_s: float
    ) -> tuple[memoryview, int]:
        """Send one request; the response frame and where its body starts (after the header)."""
        if self._failure is not None:
            raise self._failure
        assert self._transport is not None and self._waiter is None, "one request at a time"
        correlation = self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        header = _HEADER.pack(api_key, version, correlation, len(self._client_id))
        header += self._client_id + (b"\x00" if flexible else b"")  # request header v2 / v1
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        self._transport.writelines([_I32.pack(len(header) + len(body)), header, body])
        try:
            async with asyncio.timeout(timeout_s):
                frame = await waiter
        except TimeoutError:
            timed_out = RequestTimeoutError(f"{self.address}: no answer in {timeout_s:g} s")
            self._fail(timed_out)
            raise timed_out from None
        finally:
            self._waiter = None
        if _I32.unpack_from(frame)[0] != correlation:
            stray = ProtocolViolationError(f"{self.address}: answer to another request")
            self._fail(stray)
            raise stray
        return frame, _I32.size + (_tagged_fields_size(frame, _I32.size) if flexible else 0)

    def close(self) -> None:
        self._fail(ConnectionClosedError(f"{self.address}: closed"))

    # -- asyncio.BufferedProtocol callbacks ----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's: no asyncio.Transport
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._failure is not None:  # aborted: whatever is still read is discarded
            return memoryview(bytearray(_DISCARD))
        # Read only up to the end of the current frame: a frame is handed out whole.
        end = _PREFIX if self._frame_end is None else self._frame_end
        return memoryview(self._buffer)[self._filled : end]

    def buffer_updated(self, nbytes: int) -> None:
        if self._failure is not None:
            return
        self._filled += nbytes
        if self._frame_end is None and self._filled == _PREFIX:
            self._on_prefix()
        elif self._frame_end is not None and self._filled == self._frame_end:
            frame = memoryview(self._buffer)[_PREFIX : self._frame_end]
            self._filled, self._frame_end = 0, None
            if self._waiter is None or self._waiter.done():
                self._fail(ProtocolViolationError(f"{self.address}: unexpected answer"))
            else:
                self._waiter.set_result(frame)

    def _on_prefix(self) -> None:
        (size,) = _I32.unpack_from(self._buffer)
        if size < _I32.size or size > self._max_frame:
            self._fail(ResponseTooLargeError(f"{self.address}: response frame of {size} bytes"))
            return
        self._frame_end = _PREFIX + size
        if len(self._buffer) < self._frame_end:
            # A new buffer, not a resize: views into the previous frame may still be alive.
            self._buffer = bytearray(self._frame_end)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionClosedError(f"{self.address}: connection closed by the leader"))

    def _fail(self, error: BrokerConnectionError) -> None:
        if self._failure is None:
            self._failure = error
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(self._failure)
        if self._transport is not None:
            self._transport.abort()


def _tagged_fields_size(frame: memoryview, offset: int) -> int:
    """Size of the tagged-field section at `offset` (response header v1; Pier sends none)."""
    if offset >= len(frame) or frame[offset] != 0:
        raise ProtocolViolationError("response header tagged fields not supported")
    return 1
