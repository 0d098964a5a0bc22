"""One streamed produce request: its records, a chunk of the body at a time, and their answers.

Owns: `ProduceStream`. Each chunk's records (`bodies.json_chunks`) are parsed, then prepared and
handed to the batcher together (`HttpProducer.prepare_many` / `enqueue_many`: one storage lease,
quota charge and meter count per chunk, one pump of the batcher per partition); a record the
rules refuse, or one that is not a record, is answered in its place. Answers are JSON lines in
the order of the records, written as soon as the records before them are done (one write per
chunk). Reading pauses while `MAX_IN_FLIGHT` records (or `MAX_IN_FLIGHT_BYTES`) are unanswered,
and for the throttle a chunk earned. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from brokers.client.errors import ClientError
from brokers.client.producer import ProduceResult
from gateway.http.bodies import TRAILING
from gateway.http.context import Caller
from gateway.http.errors import ApiError
from gateway.http.produce import AnswerLines, HttpProducer, Prepared, failed
from gateway.http.records import ProduceRecord, produce_record

MAX_IN_FLIGHT = 2000  # records of one stream not yet answered before its reading pauses
MAX_IN_FLIGHT_BYTES = 16 * 1024 * 1024  # and their bytes
Waiting = str | tuple[asyncio.Future[ProduceResult], Prepared]  # an answer, or a record's


class ProduceStream:
    def __init__(
        self,
        producer: HttpProducer,
        caller: Caller,
        cluster_id: str,
        topic: str,
        response: web.StreamResponse,
    ) -> None:
        self._producer = producer
        self._caller = caller
        self._topic = topic
        self._response = response
        self._answers = AnswerLines(cluster_id, topic)
        self._in_flight: deque[tuple[Waiting, int]] = deque()  # in order, with record bytes
        self._held = 0  # bytes of the records in `_in_flight`

    async def run(self, chunks: AsyncIterator[list[tuple[Any, int]]]) -> None:
        """Produce every record of the body and answer each; a broken body ends the stream
        with its problem as the last line."""
        try:
            async for chunk in chunks:
                await self._chunk(chunk)
                await self._drain(MAX_IN_FLIGHT)
        except ApiError as exc:  # the stream itself is broken: say so, then end it
            self._answered(exc.body())
        await self._drain(0)

    async def _chunk(self, chunk: list[tuple[Any, int]]) -> None:
        run: list[tuple[ProduceRecord, int]] = []
        for value, size in chunk:
            if value is TRAILING:
                self._caller.meter(self._topic, bytes_in=size)
                continue
            try:
                run.append((produce_record(value), size))
            except ApiError as exc:  # answered after the records before it
                await self._send(run)
                run = []
                self._caller.meter(self._topic, bytes_in=size, requests=1)
                self._answered(exc.body())
        await self._send(run)

    async def _send(self, run: list[tuple[ProduceRecord, int]]) -> None:
        """Prepare and enqueue a run of parsed records together; refusals answered in place."""
        if not run:
            return
        outcomes, throttle = await self._producer.prepare_many(self._caller, self._topic, run)
        ready = [p for p in outcomes if isinstance(p, Prepared)]
        futures = iter(self._producer.enqueue_many(self._caller, ready))
        for outcome, (_record, size) in zip(outcomes, run, strict=True):
            if isinstance(outcome, ApiError):
                self._answered(outcome.body())
            else:  # no task per record: the batcher's future is awaited in its turn
                self._in_flight.append(((next(futures), outcome), size))
                self._held += size
        if throttle > 0:  # read nothing more until the throttle has passed (a mute)
            await asyncio.sleep(throttle / 1000)

    def _answered(self, body: dict[str, Any]) -> None:
        self._in_flight.append((json.dumps(body, separators=(",", ":")) + "\n", 0))

    async def _drain(self, limit: int) -> None:
        """Answer, in order, every record already done, and wait until at most `limit`
        records and `MAX_IN_FLIGHT_BYTES` remain (one write per call)."""
        in_flight = self._in_flight
        lines: list[str] = []
        while in_flight and (
            len(in_flight) > limit
            or self._held > MAX_IN_FLIGHT_BYTES
            or isinstance(in_flight[0][0], str)
            or in_flight[0][0][0].done()
        ):
            item, size = in_flight.popleft()
            self._held -= size
            if isinstance(item, str):
                lines.append(item)
                continue
            future, prepared = item
            if not future.done():  # over the limit: wait for it (done ones cost no await)
                await asyncio.wait((future,))
            lines.append(self._line(future, prepared))
        if lines:
            await self._response.write("".join(lines).encode())

    def _line(self, future: asyncio.Future[ProduceResult], prepared: Prepared) -> str:
        error = future.exception()
        if error is None:
            return self._answers.line(prepared, future.result())
        if isinstance(error, ClientError):
            return json.dumps(failed(error, prepared).body(), separators=(",", ":")) + "\n"
        raise error
