"""The controller→broker channel (Kafka's `ControllerChannelManager` / `RequestSendThread`).

Owns: one outbound queue and one sender task per live broker. Requests to a broker go out one at
a time, in the order queued, so a broker sees the controller's decisions in the order they were
made (Kafka sends at most one request per broker in flight for the same reason). A request that
fails on the network is retried, over a new connection, after `retry_backoff_s`, until it is
answered or the broker is removed (it died: its queue is dropped, as Kafka drops a dead broker's
queue — the broker resyncs from the LeaderAndIsr/UpdateMetadata it gets when it registers again).
Reachability: a broker killed outright stays registered until ZooKeeper expires its session, and
the controller must not elect it meanwhile. The channel notices first: a sender connects as soon
as it is created and, while idle, watches its open connection. When that closes (or a send
fails) the broker is suspect, and the sender connects again at once: a success clears the
suspicion (a broker may close an idle connection); a refusal means the process that registered
no longer listens, so the broker stays in `unreachable` (the set the controller's context reads,
see `ControllerContext.leader_candidates`) for as long as that registration lasts: a process
answering at its address later is a restarted one, which is not registered yet (it waits for the
old registration to expire) and joins under a new broker epoch, with a new sender. Suspect
brokers are already left out, so a decision taken while the probe runs cannot choose them. A
timeout or an unreachable host proves nothing. The watch itself wakes a few loop turns after the
close arrives, so every decision first asks the kernel (`notice_closed`, one `poll` over the idle
connections): a ControlledShutdown read in the same turn as a killed broker's close must not
elect it. Even that close may not have arrived: the kernel delivers a killed process's FIN
asynchronously (over loopback, through a per-CPU queue that a busy machine drains late), while a
ControlledShutdown sent a moment later from another CPU can arrive first. A listener, though, is
gone the moment the process exits, so elections that move leadership first `confirm_reachable`:
one fresh connection to each broker not already left out, at once and bounded by
`CONFIRM_TIMEOUT_S`; a refusal is the same proof as the probe's.
Framing is Kafka's: request header v2 and response header v1 (the four control APIs are flexible
at the versions in `requests.py`). Runs on the controller's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
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
# How long an election waits for its fresh connections: a refusal comes back within a round trip;
# a host that does not answer proves nothing, and an election must not wait on it for long.
CONFIRM_TIMEOUT_S = 0.25
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
        self._work = asyncio.Event()
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._correlation = 0
        self.refused = False  # a connection was refused: this registration's process is gone
        self.watching = False  # idle with an open connection that only a close can make readable
        self.task = asyncio.get_running_loop().create_task(self._run())

    def put(self, item: _Queued) -> None:
        self.queue.put_nowait(item)
        self._work.set()

    async def _run(self) -> None:
        await self._probe()  # connect at once: a dead broker is known before anything is decided
        while True:
            if self.queue.empty():
                await self._idle()
                continue
            await self._serve_one(self.queue.get_nowait())

    async def _serve_one(self, item: _Queued) -> None:
        """Deliver one request and hand its response on. Its own frame, so neither the request
        nor the response stays referenced while the sender idles: an UpdateMetadata for a few
        thousand new partitions is megabytes of objects (issue 25, the controller's memory)."""
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
            except (OSError, EOFError, asyncio.IncompleteReadError) as exc:
                self._channel.suspect(self)  # until the reconnect answers
                log.info("event=controller_send_retry broker=%d error=%r", self.broker_id, exc)
            except TimeoutError as exc:
                log.info("event=controller_send_retry broker=%d error=%r", self.broker_id, exc)
            except rq.MalformedControlRequestError as exc:
                log.warning("event=controller_bad_response broker=%d error=%s", self.broker_id, exc)
            self._disconnect()
            await asyncio.sleep(self._channel.retry_backoff_s)

    async def _idle(self) -> None:
        """Wait for work; meanwhile notice the broker going away (see the module docstring)."""
        self._work.clear()
        if not self.queue.empty():
            return
        if self._stream is None:
            await self._work.wait()
            return
        closed = asyncio.ensure_future(self._stream[0].read(1))  # b"" once the peer closed
        work = asyncio.ensure_future(self._work.wait())
        self.watching = True
        try:
            await asyncio.wait((closed, work), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.watching = False
            for waiter in (closed, work):
                waiter.cancel()
            # Settled before anyone reads the stream again (a reader allows one waiter).
            await asyncio.gather(closed, work, return_exceptions=True)
        if closed.done() and not closed.cancelled():
            # End of stream, a reset, or bytes nobody asked for: the connection is done. Most
            # likely the broker died: suspect (not electable) until the probe tells.
            self._disconnect()
            self._channel.suspect(self)
            await self._probe()

    def watched_fd(self) -> int | None:
        """The idle connection's descriptor for `ControllerChannel.notice_closed`: -1 when the
        loop already saw it end, None when there is nothing to watch."""
        if not self.watching or self._stream is None:
            return None
        reader, writer = self._stream
        if reader.at_eof() or reader.exception() is not None:
            return -1
        sock = writer.get_extra_info("socket")
        return -1 if sock is None else int(sock.fileno())

    async def _probe(self) -> None:
        """Connect now, to learn whether the broker still listens."""
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(self._channel.request_timeout_s):
                await self._connect()

    async def confirm(self) -> None:
        """A fresh connection, closed at once: refused, the broker is unreachable (this
        registration's process is gone); anything else changes nothing."""
        try:
            _reader, writer = await self._channel.connect(self.host, self.port)
        except ConnectionRefusedError:
            self._channel.mark_reachable(self, False)
            return
        except OSError:
            return
        writer.close()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A new connection. A refusal marks the broker unreachable for as long as this sender
        (registration) lasts; anything else (a success, a timeout, an unreachable host: no proof
        that the broker is gone) clears a suspicion."""
        try:
            stream = await self._channel.connect(self.host, self.port)
        except ConnectionRefusedError:
            self._channel.mark_reachable(self, False)
            raise
        except BaseException:
            self._channel.mark_reachable(self, True)
            raise
        self._channel.mark_reachable(self, True)
        self._stream = stream
        return stream

    async def _exchange(self, request: Any) -> Any:
        reader, writer = self._stream or await self._connect()
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
        # Suspect or refusing brokers (module docstring); shared with the controller's context.
        self.unreachable: set[int] = set()

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
        self.unreachable.discard(broker_id)
        self._senders[broker_id] = _BrokerSender(self, broker_id, host, port)

    async def remove_broker(self, broker_id: int) -> None:
        """The broker is gone: drop its queue and stop retrying to it."""
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            self.unreachable.discard(broker_id)
            await sender.stop()

    def suspect(self, sender: _BrokerSender) -> None:
        """The sender's connection just closed: not electable until it connects again."""
        if self._senders.get(sender.broker_id) is sender:
            self.unreachable.add(sender.broker_id)

    def notice_closed(self) -> None:
        """Suspect now every broker whose idle connection the kernel reports readable (a closed
        idle control connection is the only way it becomes so), before a decision reads
        `unreachable`; each sender's own watch follows up with its probe."""
        watched: dict[int, _BrokerSender] = {}
        for sender in self._senders.values():
            fd = sender.watched_fd()
            if fd is None:
                continue
            if fd < 0:
                self.suspect(sender)
            else:
                watched[fd] = sender
        if not watched:
            return
        poller = select.poll()
        for fd in watched:
            poller.register(fd, select.POLLIN)
        for fd, _events in poller.poll(0):
            self.suspect(watched[fd])

    async def confirm_reachable(self, timeout_s: float = CONFIRM_TIMEOUT_S) -> None:
        """Before an election: connect afresh to every broker not already left out, and leave
        out those that refuse (see the module docstring). Returns within `timeout_s`."""
        loop = asyncio.get_running_loop()
        probes = [
            loop.create_task(sender.confirm())
            for broker_id, sender in self._senders.items()
            if broker_id not in self.unreachable
        ]
        if not probes:
            return
        _done, pending = await asyncio.wait(probes, timeout=timeout_s)
        for probe in pending:
            probe.cancel()
        await asyncio.gather(*probes, return_exceptions=True)

    def mark_reachable(self, sender: _BrokerSender, reachable: bool) -> None:
        """A sender's connection attempt succeeded (or proved nothing), or was refused."""
        broker_id = sender.broker_id
        if self._senders.get(broker_id) is not sender:
            return  # a replaced or removed sender: its broker's state is not its to say
        if not reachable and not sender.refused:
            sender.refused = True
            log.warning(
                "event=controller_broker_unreachable broker=%d address=%s:%d",
                broker_id,
                sender.host,
                sender.port,
            )
        if sender.refused:
            self.unreachable.add(broker_id)
        else:
            self.unreachable.discard(broker_id)

    def send(self, broker_id: int, request: Any, on_response: OnResponse | None = None) -> bool:
        """Queue `request` for the broker; False when the broker has no queue (not live)."""
        sender = self._senders.get(broker_id)
        if sender is None:
            return False
        sender.put(_Queued(request, on_response))
        return True

    def pending(self, broker_id: int) -> int:
        sender = self._senders.get(broker_id)
        return 0 if sender is None else sender.queue.qsize()

    async def close(self) -> None:
        for broker_id in list(self._senders):
            await self.remove_broker(broker_id)
