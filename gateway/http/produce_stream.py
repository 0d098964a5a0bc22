"""One streamed produce request: its records, a chunk of the body at a time, and their answers.

Owns: `ProduceStream`. Each chunk's records (`bodies.json_chunks`) are parsed, then prepared and
handed to the batcher together (`HttpProducer.prepare_many` / `enqueue_runs`: one storage lease,
quota charge and meter count per chunk; the chunk's records for one partition go as one run, with
one future, one pump of the batcher per partition, and each record's offset is its run's first
plus its index: no future, entry or result object per record); a record the rules refuse, or one
that is not a record, is answered in its place. Answers are JSON lines in
the order of the records, written as soon as the records before them are done (one write per
chunk). Reading pauses while `MAX_IN_FLIGHT` records (or `MAX_IN_FLIGHT_BYTES`) are unanswered,
and for the throttle a chunk earned. The stream is tracked by the tenant directory as its
tenant's sessions are (`TenantDirectory.track`): once its key is revoked or its tenant is no
longer active, every later record is refused with 401 and nothing more is produced; a change to
the key or tenant between the login and the stream's start refuses it the same way (the
verification cache's epoch, `Caller.login_epoch`). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from brokers.client.errors import ClientError
from brokers.client.producer import ProduceResult
from brokers.records.builder import Row
from gateway.http import stream_columns
from gateway.http.bodies import TRAILING
from gateway.http.context import Caller
from gateway.http.errors import ApiError, from_client
from gateway.http.pending import RunResult
from gateway.http.produce import AnswerLines, HttpProducer, Prepared, failed
from gateway.http.records import ProduceRecord, produce_record
from gateway.http.stream_columns import Columns
from tenancy.domain import Principal

MAX_IN_FLIGHT = 2000  # records of one stream not yet answered before its reading pauses
MAX_IN_FLIGHT_BYTES = 16 * 1024 * 1024  # and their bytes


@dataclass(slots=True)
class _Sent:
    """A chunk's records at the batcher: its runs' futures, and per record, in order, its place
    (run, index in the run) with its `Prepared`, or the answer line of its refusal."""

    futures: list[asyncio.Future[RunResult]]
    items: list[tuple[int, int, Prepared] | str]
    size: int  # the records' bytes

    def done(self) -> bool:
        return all(future.done() for future in self.futures)


@dataclass(slots=True)
class _Plain:
    """A chunk read as columns (`stream_columns`) at the batcher: its runs' futures, each
    record's place (run, index in the run) and partition, its value, and their time stamp."""

    futures: list[asyncio.Future[RunResult]]
    places: list[tuple[int, int]]
    partitions: list[int]
    columns: Columns
    stamp_ms: int
    size: int

    def done(self) -> bool:
        return all(future.done() for future in self.futures)


@dataclass(eq=False, slots=True)
class _Access:
    """The stream as one of its tenant's sessions: closed (`ended`) with its key or tenant."""

    principal: Principal | None
    ended: str | None = None

    def close(self, reason: str) -> None:
        self.ended = reason


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
        self._in_flight: deque[_Sent | _Plain | str] = deque()  # in order: chunks, or lines
        self._records = 0  # records in `_in_flight`
        self._held = 0  # their bytes

    async def run(self, chunks: AsyncIterator[list[tuple[Any, int]]]) -> None:
        """Produce every record of the body and answer each; a broken body ends the stream
        with its problem as the last line."""
        directory = self._caller.services.session.directory
        access = _Access(self._caller.principal)
        access.ended = directory.track(access, self._caller.state) or self._login_changed()
        try:
            async for chunk in chunks:
                if access.ended is not None:
                    self._refused(chunk, access.ended)
                else:
                    await self._chunk(chunk)
                await self._drain(MAX_IN_FLIGHT)
        except ApiError as exc:  # the stream itself is broken: say so, then end it
            self._answered(exc.body())
        finally:
            directory.untrack(access)
        await self._drain(0)

    def _login_changed(self) -> str | None:
        epoch = self._caller.login_epoch
        authenticator = self._caller.services.session.authenticator
        if epoch is not None and authenticator.login_changed_since(self._caller.principal, epoch):
            return "the API key or its tenant changed since the login; authenticate again"
        return None

    def _refused(self, chunk: list[tuple[Any, int]], reason: str) -> None:
        """Every record of a chunk read after the stream lost its access: 401 each, none sent."""
        line = _line(ApiError(401, reason, 401).body())
        for value, _size in chunk:
            if value is not TRAILING:
                self._in_flight.append(line)
                self._records += 1

    async def _chunk(self, chunk: list[tuple[Any, int]]) -> None:
        if chunk and chunk[-1][0] is TRAILING:  # the whitespace after the last value
            self._caller.meter(self._topic, bytes_in=chunk[-1][1])
            chunk = chunk[:-1]
        if len(chunk) > 1 and await self._plain(chunk):
            return
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
        futures, places = self._producer.enqueue_runs(self._caller, outcomes)
        items: list[tuple[int, int, Prepared] | str] = []
        for outcome, place in zip(outcomes, places, strict=True):
            if isinstance(outcome, ApiError):
                items.append(_line(outcome.body()))
            else:  # no future of its own: its run's is awaited in its turn
                assert place is not None
                items.append((place[0], place[1], outcome))
        size = sum(size for _record, size in run)
        self._in_flight.append(_Sent(futures, items, size))
        self._records += len(items)
        self._held += size
        if throttle > 0:  # read nothing more until the throttle has passed (a mute)
            await asyncio.sleep(throttle / 1000)

    async def _plain(self, chunk: list[tuple[Any, int]]) -> bool:
        """The chunk as columns, when its records are plain and pass the rules together;
        False (nothing done) when they must go record by record."""
        columns = stream_columns.columns([value for value, _size in chunk])
        if columns is None:
            return False
        sizes = [size for _value, size in chunk]
        admitted = await self._producer.admit_columns(
            self._caller, self._topic, columns.partitions, sizes
        )
        if admitted is None:
            return False
        if isinstance(admitted, ApiError):  # no such topic, no fleet: each record hears it
            for _record in chunk:
                self._answered(admitted.body())
            return True
        partitions, stamp, throttle = admitted
        rows: list[Row] = [(None, value, (), stamp) for value in columns.values]
        futures, places = self._producer.enqueue_rows(self._caller, self._topic, partitions, rows)
        size = sum(sizes)
        self._in_flight.append(_Plain(futures, places, partitions, columns, stamp, size))
        self._records += len(rows)
        self._held += size
        if throttle > 0:  # read nothing more until the throttle has passed (a mute)
            await asyncio.sleep(throttle / 1000)
        return True

    def _answered(self, body: dict[str, Any]) -> None:
        self._in_flight.append(_line(body))
        self._records += 1

    async def _drain(self, limit: int) -> None:
        """Answer, in order, every record already done, and wait until at most `limit`
        records and `MAX_IN_FLIGHT_BYTES` remain (one write per call)."""
        in_flight = self._in_flight
        lines: list[str] = []
        while in_flight:
            head = in_flight[0]
            if isinstance(head, str):
                in_flight.popleft()
                lines.append(head)
                self._records -= 1
                continue
            if not (self._records > limit or self._held > MAX_IN_FLIGHT_BYTES or head.done()):
                break
            in_flight.popleft()
            if not head.done():  # over the limit: wait for it (done ones cost no await)
                await asyncio.wait(head.futures)
            if isinstance(head, _Plain):
                self._plain_lines(head, lines)
                self._records -= len(head.places)
            else:
                self._lines(head, lines)
                self._records -= len(head.items)
            self._held -= head.size
        if lines:
            await self._response.write("".join(lines).encode())

    def _lines(self, sent: _Sent, lines: list[str]) -> None:
        """The answer lines of a chunk whose runs are done, in its records' order."""
        results = [future.exception() or future.result() for future in sent.futures]
        line_at = self._answers.line_at
        for item in sent.items:
            if isinstance(item, str):
                lines.append(item)
                continue
            index, at, prepared = item
            result = results[index]
            if isinstance(result, RunResult) and result.each is None:
                first = result.first
                assert first is not None
                lines.append(line_at(prepared, first.base_offset + at, first.log_append_time_ms))
                continue
            outcome = result.outcome(at) if isinstance(result, RunResult) else result
            if isinstance(outcome, ProduceResult):
                lines.append(self._answers.line(prepared, outcome))
            elif isinstance(outcome, ClientError):
                lines.append(_line(failed(outcome, prepared).body()))
            else:
                raise outcome

    def _plain_lines(self, sent: _Plain, lines: list[str]) -> None:
        """The answer lines of a plain chunk whose runs are done, in its records' order: a
        run's lines in one pass when every run landed whole, else record by record."""
        results = [future.exception() or future.result() for future in sent.futures]
        sizes, partition_of = _run_sizes(sent, len(results))
        whole = [r for r in results if isinstance(r, RunResult) and r.first is not None]
        if len(whole) == len(results) and all(r.each is None for r in whole):
            kind, stamp = sent.columns.kind, sent.stamp_ms
            runs = [
                self._answers.plain_lines(partition_of[run], result.first, stamp, kind, sizes[run])
                for run, result in enumerate(whole)
                if result.first is not None
            ]
            lines.extend(runs[0] if len(runs) == 1 else [runs[r][i] for r, i in sent.places])
            return
        for (run, at), partition in zip(sent.places, sent.partitions, strict=True):
            result = results[run]
            outcome = result.outcome(at) if isinstance(result, RunResult) else result
            if isinstance(outcome, ProduceResult):
                size = sizes[run][at]
                lines += self._answers.plain_lines(
                    partition, outcome, sent.stamp_ms, sent.columns.kind, [size]
                )
            elif isinstance(outcome, ClientError):
                context = f"topic {self._topic!r} partition {partition}"
                lines.append(_line(from_client(outcome, context).body()))
            else:
                raise outcome


def _run_sizes(sent: _Plain, runs: int) -> tuple[list[list[int]], list[int]]:
    """The value sizes of each run of a plain chunk, and each run's partition."""
    lengths = list(map(len, sent.columns.values))
    if len(set(sent.partitions)) == 1:  # one partition: its runs are slices, in order
        starts = [i for i, (_run, at) in enumerate(sent.places) if at == 0] + [len(lengths)]
        return [lengths[a:b] for a, b in itertools.pairwise(starts)], [sent.partitions[0]] * runs
    sizes: list[list[int]] = [[] for _ in range(runs)]
    partition_of = [0] * runs
    for (run, _at), partition, length in zip(sent.places, sent.partitions, lengths, strict=True):
        sizes[run].append(length)
        partition_of[run] = partition
    return sizes, partition_of


def _line(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":")) + "\n"
