"""The controller→broker channel (Kafka's `ControllerChannelManager` / `RequestSendThread`).

Owns: one outbound queue and one sender task per live broker. Requests to a broker go out one at
a time, in the order queued, so a broker sees the controller's decisions in the order they were
made (Kafka sends at most one request per broker in flight for the same reason). A request that
fails on the network is retried, over a new connection, after `retry_backoff_s`, until it is
answered or the broker is removed (it died: its queue is dropped, as Kafka drops a dead broker's
queue — the broker resyncs from the LeaderAndIsr/UpdateMetadata it gets when it registers again).
Framing is Kafka's: request header v2 and response header v1 (the four control APIs are flexible
at the versions in `requests.py`). Runs on the controller's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from brokers.controller import requests as rq
from brokers.wire.primitives import read_uvarint

log = logging.getLogger(__name__)
_HEADER = struct.Struct(">hhih")
_INT32 = struct.Struct(">i")
OnResponse = Callable[[int, Any], None]
Connect = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


@dataclass(frozen=True, slots=True)
class _Queued:
    request: Any
    on_response: OnResponse | None


def frame_request(request: Any, correlation_id: int, client_id: bytes) -> bytes:
    """A size-prefixed request: header v2 (with an empty tagged-field section), then the body."""
    header = _HEADER.pack(
        int(request.__api_key__), int(request.__version__), correlation_id, len(client_id)
    )
    payload = header + client_id + b"\x00" + rq.encode(request)
    return _INT32.pack(len(payload)) + payload


def read_response(api_key: int, frame: bytes, correlation_id: int) -> Any:
    """Decode a response frame (without its size prefix); MalformedControlRequestError if bad."""
    view = memoryview(frame)
    if len(view) < 5 or _INT32.unpack_from(view, 0)[0] != correlation_id:
        raise rq.MalformedControlRequestError("response for another request")
    try:
        count, pos = read_uvarint(view, 4)
        for _ in range(count):  # response header v1 tagged fields: none expected, skipped
            _tag, pos = read_uvarint(view, pos)
            size, pos = read_uvarint(view, pos)
            pos += size
    except Exception as exc:
        raise rq.MalformedControlRequestError(f"bad response header: {exc!r:.60}") from None
    return rq.decode(rq.RESPONSES[api_key], view, pos)


class _BrokerSender:
    """The queue and sender task of one destination broker."""

    def __init__(self, channel: ControllerChannel, broker_id: int, host: str, port: int) -> None:
        self.broker_id, self.host, self.port = broker_id, host, port
        self._channel = channel
        self.queue: asyncio.Queue[_Queued] = asyncio.Queue()
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._correlation = 0
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            response = await self._deliver(item.request)
            if item.on_response is not None:
                try:
                    item.on_response(self.broker_id, response)
                except Exception:
                    log.exception("controller response callback failed")

    async def _deliver(self, request: Any) -> Any:
        """Send until answered; only cancellation (the broker was removed) stops it."""
        while True:
            try:
                return await self._exchange(request)
            except (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError) as exc:
                log.info("event=controller_send_retry broker=%d error=%r", self.broker_id, exc)
            except rq.MalformedControlRequestError as exc:
                log.warning("event=controller_bad_response broker=%d error=%s", self.broker_id, exc)
            self._disconnect()
            await asyncio.sleep(self._channel.retry_backoff_s)

    async def _exchange(self, request: Any) -> Any:
        if self._stream is None:
            self._stream = await self._channel.connect(self.host, self.port)
        reader, writer = self._stream
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        writer.write(frame_request(request, self._correlation, self._channel.client_id))
        async with asyncio.timeout(self._channel.request_timeout_s):
            await writer.drain()
            (size,) = _INT32.unpack(await reader.readexactly(4))
            frame = await reader.readexactly(size)
        return read_response(int(request.__api_key__), frame, self._correlation)

    def _disconnect(self) -> None:
        if self._stream is not None:
            self._stream[1].close()
            self._stream = None

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        self._disconnect()


async def _open(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(host, port)


class ControllerChannel:
    def __init__(
        self,
        *,
        client_id: str = "pier-controller",
        retry_backoff_s: float = 0.1,
        request_timeout_s: float = 30.0,
        connect: Connect = _open,
    ) -> None:
        self.client_id = client_id.encode()
        self.retry_backoff_s = retry_backoff_s
        self.request_timeout_s = request_timeout_s
        self.connect = connect
        self._senders: dict[int, _BrokerSender] = {}

    @property
    def brokers(self) -> set[int]:
        return set(self._senders)

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        """Start a queue for a broker that registered (a no-op if it has one at that address)."""
        sender = self._senders.get(broker_id)
        if sender is not None and (sender.host, sender.port) == (host, port):
            return
        if sender is not None:
            sender.task.cancel()
        self._senders[broker_id] = _BrokerSender(self, broker_id, host, port)

    async def remove_broker(self, broker_id: int) -> None:
        """The broker is gone: drop its queue and stop retrying to it."""
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            await sender.stop()

    def send(self, broker_id: int, request: Any, on_response: OnResponse | None = None) -> bool:
        """Queue `request` for the broker; False when the broker has no queue (not live)."""
        sender = self._senders.get(broker_id)
        if sender is None:
            return False
        sender.queue.put_nowait(_Queued(request, on_response))
        return True

    def pending(self, broker_id: int) -> int:
        sender = self._senders.get(broker_id)
        return 0 if sender is None else sender.queue.qsize()

    async def close(self) -> None:
        for broker_id in list(self._senders):
            await self.remove_broker(broker_id)
