"""Request bodies of the tenant HTTP API, read within bounds (docs/security.md, "HTTP decoding").

Owns: reading a request's body without ever holding more than a bound of it — `read_body` (the
whole body of a non-streamed request: a declared `Content-Length` over the limit is refused 413
before a byte is read, a chunked body is refused 413 as soon as it passes the limit), `read_json`
(a small control body, at most `MAX_CONTROL_BODY_BYTES`), `json_stream` (the JSON values of a
streamed produce body as they arrive) and `body_values` (those of a whole body) — and the
`Content-Encoding`s accepted: identity, gzip, deflate and zstd. aiohttp's own decoding is off
(`auto_decompress=False`: it would answer codings it cannot decode, br and zstd, with a plain-text
400 before any handler runs); `_Decoder` decodes here, at most `DECODE_STEP` bytes per step, so
the limits apply to decoded bytes and a compression bomb stops at them. Any other coding (br
included) is 415 before a byte is read; a body that is not what its coding says is 400.

A client that asks `Expect: 100-continue` gets its `100 Continue` from the first read of the body
(`defer_continue`), never before the route has authorized it. Every read of the body waits at most `BodyReading.timeout_s` (`http.body.read.timeout.ms`) for
its next bytes: a body that stops arriving is 408 and its connection is closed. The bytes held
are drawn from the tenant's pool of request bytes in flight (`queued.max.request.bytes`, the
same `ByteBudget` its Kafka connections use) and given back when the request is answered
(`BodyReading.release`, called by the server for every request), so no tenant's HTTP bodies hold
more than its pool, however many connections it opens; a body that cannot get its bytes within
the read timeout is 429, one that would hold more than the whole pool 413 at once.

Streamed values are split by `JsonSplitter` on raw bytes, before any decoding: it follows
strings, escapes and nesting with a few regular-expression steps per structural character, so
each byte is looked at once however the body is cut into chunks (no re-parse of a growing buffer),
and it keeps only the bytes of the value being read: a value over `max_value_bytes` is 413, nesting
deeper than `MAX_DEPTH` or a byte that cannot start a JSON value (invalid UTF-8, say) is 400 at
once, whitespace between values is counted (it is metered) but not kept. A whole value is then
decoded as strict UTF-8 JSON; one that is not ends the stream with 400.
Errors are `ApiError`s, answered as the API's error JSON. `JsonSplitter` and `_Decoder` are pure
and not thread-safe; the readers run on the event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import operator
import re
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import zstandard
from aiohttp import web

from gateway.http.errors import ApiError
from gateway.kafka.byte_budget import ByteBudget, Charge

MAX_BODY_BYTES = 16 * 1024 * 1024  # a non-streamed body (one record, or several back to back)
MAX_CONTROL_BODY_BYTES = 1024 * 1024  # topics, configs, consumer settings, offsets
MAX_VALUE_BYTES = 8 * 1024 * 1024  # one value of a streamed produce body
MAX_DEPTH = 128
_OPEN_BRACE = ord("{")
_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))  # a digit "0", the rest " "
_LONG_NUMBER = b"0" * 19  # 19 digits in a row: more than orjson keeps as an integer
_NOT_NESTING = bytes(b for b in range(256) if b not in b"{[\n")  # all but openers and newlines
SLICE_BYTES = 64 * 1024  # a whole body is split this much per turn of the event loop
DECODE_STEP = 64 * 1024  # the most a gzip/deflate step decodes before the limit is checked
ZSTD_SLICE = 32  # zstd input per step: at most 8 RLE blocks, 1 MiB, before the limit is checked
ZSTD_MAX_WINDOW = 8 * 1024 * 1024  # what a zstd frame may make the decoder allocate (level 19's)
BODY_READ_TIMEOUT_S = 30.0  # `http.body.read.timeout.ms`'s default
ACCEPTED_ENCODINGS = frozenset({"", "identity", "gzip", "deflate", "zstd"})
READING_KEY = "pier.body_reading"
CONTINUE_KEY = "pier.continue"  # a `100 Continue` is owed before the body's first read
TRAILING: Any = object()  # the whitespace after a stream's last value (metered, not a record)

_BLANK = re.compile(rb"[ \t\r\n]*")
_STRUCTURE = re.compile(rb'[{}\[\]"]')
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_SCALAR = re.compile(rb'[^ \t\r\n{}\[\],:"]*')
_SCALAR_START = frozenset(b"-0123456789tfn")
_OUT, _IN, _STRING, _SCALAR_STATE = range(4)


def too_large(what: str, limit: int) -> ApiError:
    return ApiError(413, f"{what} is larger than {limit} bytes", 413)


@dataclass(slots=True)
class BodyReading:
    """How one request's body is read: the wait for its next bytes, and the tenant's pool its
    bytes are drawn from (None before the caller is known: no body is read before that). The
    server makes one per request and calls `release` once it is answered."""

    timeout_s: float = BODY_READ_TIMEOUT_S
    budget: ByteBudget | None = None
    started: bool = False  # a byte of the body was asked for
    _held: list[Charge] = field(default_factory=list)

    async def hold(self, size: int) -> None:
        """Draw `size` bytes from the tenant's pool, waiting at most `timeout_s` (429 then)."""
        if self.budget is None or size <= 0:
            return
        held = sum(charge.size for charge in self._held) + size
        if held > self.budget.capacity:  # it could only wait for itself (Kafka caps a frame so)
            raise too_large("the request body (queued.max.request.bytes)", self.budget.capacity)
        charge = self.budget.try_take(size)
        if charge is None:
            charge = await self._wait(self.budget, size)
        self._held.append(charge)

    async def _wait(self, budget: ByteBudget, size: int) -> Charge:
        granted: asyncio.Future[Charge] = asyncio.get_running_loop().create_future()

        def deliver(charge: Charge) -> None:
            if granted.done():
                charge.release()
            else:
                granted.set_result(charge)

        waiter = budget.wait(size, deliver)
        try:
            async with asyncio.timeout(self.timeout_s):
                return await granted
        except BaseException as exc:  # the timeout, or the request cancelled (client gone)
            waiter.cancel()
            if granted.done() and not granted.cancelled():
                granted.result().release()  # granted in the same turn the wait ended
            else:
                granted.cancel()  # a grant still on its way is given back by `deliver`
            if isinstance(exc, TimeoutError):
                raise ApiError(
                    429, "the tenant's request bytes in flight are at their limit", 429, 1
                ) from None
            raise

    def release(self) -> None:
        """Give back every byte held (the request was answered, or its body is done with)."""
        held, self._held = self._held, []
        for charge in held:
            charge.release()


def reading_of(request: web.BaseRequest) -> BodyReading:
    reading = request.get(READING_KEY)
    if not isinstance(reading, BodyReading):
        reading = BodyReading()
        request[READING_KEY] = reading
    return reading


def check_encoding(request: web.BaseRequest) -> str:
    """The body's `Content-Encoding`; 415 for one the API does not decode (before any read)."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ACCEPTED_ENCODINGS:
        raise ApiError(
            415,
            f"Content-Encoding {encoding[:64]!r} is not accepted (identity, gzip, deflate, zstd)",
            415,
        )
    return encoding


class _Decoder:
    """Decodes a body's `Content-Encoding` in bounded steps: `feed` and `finish` yield pieces of
    at most `DECODE_STEP` bytes for gzip/deflate and about 1 MiB for zstd, so the reader checks
    its limit between them and a bomb is never inflated past it; a zstd frame asking for a window
    over `ZSTD_MAX_WINDOW` is refused rather than allocated. 400 for a malformed body."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding if encoding not in ("", "identity") else ""
        self._zlib: Any = None
        self._zstd: Any = None
        self._seen = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        if not self.encoding:
            if data:
                yield data
            return
        if not data:
            return
        try:
            if self.encoding == "zstd":
                yield from self._zstd_feed(data)
            else:
                yield from self._zlib_feed(data)
        except (zlib.error, zstandard.ZstdError):
            raise self._invalid() from None

    def finish(self) -> Iterator[bytes]:
        """At the end of the body: what is left; 400 when the compressed data ends early."""
        if not self.encoding or not self._seen:
            return
        if self.encoding == "zstd":
            if self._zstd is not None and not self._zstd.eof:
                raise self._invalid()
            return
        try:
            yield from self._zlib_feed(b"")
        except zlib.error:
            raise self._invalid() from None
        if not self._zlib.eof:
            raise self._invalid()

    def _invalid(self) -> ApiError:
        return ApiError(400, f"the request body is not valid {self.encoding} data", 400)

    def _zlib_feed(self, data: bytes) -> Iterator[bytes]:
        if self._zlib is None:
            if self.encoding == "gzip":
                wbits = 16 + zlib.MAX_WBITS
            else:  # deflate: zlib-wrapped as RFC 9110 says, or raw as some clients send it
                wbits = zlib.MAX_WBITS if data[0] & 0x0F == 8 else -zlib.MAX_WBITS
            self._zlib = zlib.decompressobj(wbits)
            self._seen = True
        decoder = self._zlib
        pending = data
        while True:
            if decoder.eof:
                if pending or decoder.unused_data:
                    raise zlib.error("data after the end of the compressed body")
                return
            out = decoder.decompress(pending, DECODE_STEP)
            pending = decoder.unconsumed_tail
            if out:
                yield out
            if not pending and len(out) < DECODE_STEP:
                return

    def _zstd_feed(self, data: bytes) -> Iterator[bytes]:
        self._seen = True
        view = memoryview(data)
        for start in range(0, len(view), ZSTD_SLICE):
            piece = bytes(view[start : start + ZSTD_SLICE])
            while piece:
                if self._zstd is None or self._zstd.eof:  # frames may follow one another
                    self._zstd = zstandard.ZstdDecompressor(
                        max_window_size=ZSTD_MAX_WINDOW
                    ).decompressobj()
                out = self._zstd.decompress(piece)
                piece = self._zstd.unused_data if self._zstd.eof else b""
                if out:
                    yield out


async def defer_continue(request: web.Request) -> None:
    """The routes' `expect_handler`: where aiohttp would answer `Expect: 100-continue` as soon as
    the request arrives, the `100 Continue` is sent by the first read of the body instead — after
    the route has authenticated and authorized the caller — so a client that waits for it never
    sends a body that would be refused. Other `Expect` values are ignored."""
    if request.headers.get("Expect", "").lower() == "100-continue":
        request[CONTINUE_KEY] = True


async def _continue(request: web.BaseRequest) -> None:
    if request.get(CONTINUE_KEY) and request.version >= (1, 1):
        request[CONTINUE_KEY] = False
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer's own bytes are counted from here


async def _next_chunk(request: web.BaseRequest, reading: BodyReading) -> bytes:
    """The body's next bytes as sent (b"" at its end), within the read timeout (408)."""
    if not reading.started:
        await _continue(request)
    reading.started = True
    try:
        async with asyncio.timeout(reading.timeout_s):
            return await request.content.readany()
    except TimeoutError:
        raise ApiError(
            408, f"the request body stopped arriving for {reading.timeout_s:g} s", 408
        ) from None


async def decoded_chunks(request: web.BaseRequest) -> AsyncIterator[bytes]:
    """The body's decoded bytes in pieces of at most about `DECODE_STEP` (1 MiB for zstd), each
    drawn from the tenant's pool before it is handed on (the caller keeps what it keeps)."""
    decoder = _Decoder(check_encoding(request))
    reading = reading_of(request)
    while chunk := await _next_chunk(request, reading):
        for piece in decoder.feed(chunk):
            await reading.hold(len(piece))
            yield piece
    for piece in decoder.finish():
        await reading.hold(len(piece))
        yield piece


async def read_body(request: web.BaseRequest, limit: int) -> bytes:
    """The whole body, at most `limit` decoded bytes (413 beyond, as soon as it is known)."""
    encoding = check_encoding(request)
    declared = request.content_length
    if declared is not None and declared > limit and "Content-Encoding" not in request.headers:
        raise too_large("the request body", limit)
    whole = _arrived(request, encoding)
    if whole is not None:  # the usual small body: no wait, no decoder
        reading = reading_of(request)
        reading.started = True
        if len(whole) > limit:
            raise too_large("the request body", limit)
        await reading.hold(len(whole))
        return whole
    body = bytearray()
    async for piece in decoded_chunks(request):
        body += piece
        if len(body) > limit:
            raise too_large("the request body", limit)
    return bytes(body)


def _arrived(request: web.BaseRequest, encoding: str) -> bytes | None:
    """The whole body when all of it has arrived already (aiohttp has it buffered), it is sent
    without a coding and no `100 Continue` is owed: taken at once, without a read's wait."""
    content = request.content
    if encoding not in ("", "identity") or request.get(CONTINUE_KEY) or not content.is_eof():
        return None
    return content.read_nowait(-1)


async def read_json(request: web.BaseRequest) -> Any:
    """A control body as JSON (None when empty); 400 when it is not UTF-8 JSON."""
    raw = await read_body(request, MAX_CONTROL_BODY_BYTES)
    if not raw.strip():
        return None
    return _decoded(raw)


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ApiError(400, "the request body is not UTF-8 JSON", 400) from None


def one_value(raw: bytes) -> dict[str, Any] | list[Any] | None:
    """The body when it is one JSON object or array (whitespace around it allowed) of at most
    `SLICE_BYTES`, decoded in one `json.loads`; None for anything else (`body_values` then
    splits it, and says what is wrong with it)."""
    if len(raw) > SLICE_BYTES or raw.lstrip(b" \t\r\n")[:1] not in (b"{", b"["):
        return None
    if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH:  # maybe too deep: the scan says
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict | list) else None


async def body_values(
    raw: bytes, max_value_bytes: int = MAX_BODY_BYTES
) -> AsyncIterator[tuple[Any, int]]:
    """The JSON values of a whole body, as `json_stream` gives those of a streamed one: split
    `SLICE_BYTES` at a time, with a turn of the event loop between slices."""
    splitter = JsonSplitter(max_value_bytes)
    for start in range(0, len(raw), SLICE_BYTES):
        for value, size in splitter.feed_values(raw[start : start + SLICE_BYTES]):
            yield value, size
        await asyncio.sleep(0)
    for value, size in splitter.finish():
        yield _decoded(value), size
    if splitter.blanks:
        yield TRAILING, splitter.blanks


async def json_stream(
    request: web.BaseRequest, max_value_bytes: int = MAX_VALUE_BYTES
) -> AsyncIterator[tuple[Any, int]]:
    """Each JSON value of a streamed body as it arrives, with its byte count (whitespace before
    it included); whitespace after the last value comes as `(TRAILING, count)`."""
    async for values in json_chunks(request, max_value_bytes):
        for value, size in values:
            yield value, size


async def json_chunks(
    request: web.BaseRequest, max_value_bytes: int = MAX_VALUE_BYTES
) -> AsyncIterator[list[tuple[Any, int]]]:
    """`json_stream`, a list per chunk of the body: the values that chunk completed (maybe
    none), so a reader can handle a chunk's records together."""
    splitter = JsonSplitter(max_value_bytes)
    reading = reading_of(request)
    async for chunk in decoded_chunks(request):
        done = splitter.feed_values(chunk)
        if not splitter.retained:  # nothing of this chunk is kept: its bytes go back
            reading.release()
        yield done
    last = [(_decoded(value), size) for value, size in splitter.finish()]
    if splitter.blanks:
        last.append((TRAILING, splitter.blanks))
    yield last


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A value the splitter decoded itself (from a line of its own)."""

    obj: Any


class JsonSplitter:
    """Splits bytes holding JSON values back to back into each value's bytes, as they arrive."""

    def __init__(self, max_value_bytes: int) -> None:
        self.max_value_bytes = max_value_bytes
        self.blanks = 0  # whitespace seen since the last value ended (counted, not kept)
        self.offset = 0  # bytes fed so far (for error messages)
        self._value = bytearray()  # the bytes of the value being read
        self._pos = 0  # how far into `_value` the scan has got
        self._state = _OUT
        self._depth = 0
        self._wrapped = 0  # values of this feed not decoded yet (bytes) or wrapped (`_Parsed`)

    def feed(self, data: bytes) -> list[tuple[bytes, int]]:
        """The values `data` completes, each with its size (leading whitespace included)."""
        return [(v, size) for v, size in self._feed(data, parse=False) if isinstance(v, bytes)]

    def feed_values(self, data: bytes) -> list[tuple[Any, int]]:
        """`feed`, each value decoded from JSON (400 for one that is not UTF-8 JSON). A value
        alone on its line (JSON lines: a streamed produce) is split and decoded in one
        `json.loads` of the line, without the scan; anything else goes through the scan."""
        self._wrapped = 0
        done = self._feed(data, parse=True)
        if not self._wrapped:  # all decoded already, by `_whole_lines`: nothing per value
            return done
        return [
            (
                _decoded(value)
                if isinstance(value, bytes)
                else value.obj
                if isinstance(value, _Parsed)
                else value,
                size,
            )
            for value, size in done
        ]

    def _feed(self, data: bytes, *, parse: bool) -> list[tuple[Any, int]]:
        done: list[tuple[Any, int]] = []
        start = 0
        if self._state != _OUT:  # a value goes on from the last chunk
            start = self._continue(data)
            if self._state == _OUT:
                done.append(self._take(bytes(self._value)))
        while start < len(data):
            if parse:
                start = self._skip_blanks(data, start)
                start = self._whole_lines(data, start, done)
                line = self._line(data, start)
                if line is not None:
                    value, end, newline = line
                    done.append(self._taken(value, end - start))
                    self.blanks += newline + 1 - end  # the line's end: blanks before the next
                    start = newline + 1
                    continue
            start = self._skip_blanks(data, start)
            if start >= len(data):
                break
            self._open(data[start], start)
            end = self._scan(data, start)
            if self._state == _OUT:
                done.append(self._take(data[start:end]))
                start = end
            else:  # keep the start of the value: it ends in a later chunk
                self._check_size(len(data) - start)
                self._value += memoryview(data)[start:]
                self._pos = end - start
                start = len(data)
        self.offset += len(data)
        return done

    def _line(self, data: bytes, start: int) -> tuple[_Parsed, int, int] | None:
        """The container value that fills the line from `start` (up to a newline, which must be
        in `data`), decoded, where it ends and where the newline is; None when the line is
        anything else (the scan then reads it: a value over several lines, several on one, a
        scalar, bad JSON)."""
        if start >= len(data) or data[start] not in b"{[":
            return None
        newline = data.find(b"\n", start)
        if newline < 0 or newline - start > self.max_value_bytes:
            return None
        line = data[start:newline]
        if line.count(b"{") + line.count(b"[") > MAX_DEPTH:  # maybe too deep: the scan says
            return None
        try:
            value = json.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
        return _Parsed(value), start + len(line.rstrip(b" \t\r")), newline

    def _whole_lines(self, data: bytes, start: int, done: list[tuple[Any, int]]) -> int:
        """JSON lines, fast: when every complete line from `start` is one object alone on its
        line (no blanks around it), decode them all in one `orjson.loads` of the lines joined
        into an array (no Python per byte, one call per chunk); where the lines end, or `start`
        when they are anything else (then each goes through `_line` or the scan, which decide
        alike and say what is wrong)."""
        last = data.rfind(b"\n", start)
        if last <= start or data[start] != _OPEN_BRACE:
            return start
        region = data[start:last]
        if _LONG_NUMBER in region.translate(_DIGITS):  # orjson reads those as floats
            return start
        # Every line is "{...}": it starts with "{" (above), the region ends with "}", and each
        # newline sits between "}" and "{" (counted in C, no Python per line).
        if region[-1:] != b"}" or region.count(b"\n") != region.count(b"}\n{"):
            return start
        lines = region.split(b"\n")
        if len(region) > self.max_value_bytes and max(map(len, lines)) > self.max_value_bytes:
            return start
        if max(map(len, region.translate(None, _NOT_NESTING).split(b"\n"))) > MAX_DEPTH:
            return start  # a line may nest too deep: the scan says
        try:
            values = orjson.loads(b"[" + region.replace(b"\n", b",") + b"]")
        except orjson.JSONDecodeError:
            return start
        if len(values) != len(lines):  # a line held two objects ("{...},{...}")
            return start
        sizes = list(map(len, lines))
        sizes = list(map(operator.add, sizes, itertools.repeat(1, len(sizes))))
        sizes[0] += self.blanks - 1  # the first carries the blanks before it, not a newline
        done.extend(zip(values, sizes, strict=True))  # decoded objects: never bytes, unwrapped
        self.blanks = 1  # the last line's newline
        return last + 1

    def _taken(self, value: _Parsed, length: int) -> tuple[_Parsed, int]:
        self._wrapped += 1
        size = self.blanks + length
        self.blanks = 0
        return value, size

    @property
    def retained(self) -> int:
        """Bytes kept of a value that goes on in a later chunk."""
        return len(self._value)

    def finish(self) -> list[tuple[bytes, int]]:
        """At the end of the body: a last scalar value, if one is pending; 400 inside a value."""
        if self._state == _SCALAR_STATE:
            self._state = _OUT
            return [self._take(bytes(self._value))]
        if self._state != _OUT:
            raise ApiError(400, "the body ends inside a JSON value", 400)
        return []

    def _continue(self, data: bytes) -> int:
        """Scan on with the value begun in an earlier chunk; where in `data` it ends."""
        base = len(self._value)
        self._value += data
        end = self._scan(self._value, self._pos)
        if self._state == _OUT:
            del self._value[end:]
            return end - base
        self._check_size(len(self._value))
        self._pos = end
        return len(data)

    def _skip_blanks(self, data: bytes, start: int) -> int:
        match = _BLANK.match(data, start)
        assert match is not None
        self.blanks += match.end() - start
        return match.end()

    def _open(self, first: int, start: int) -> None:
        if first in b'{["':  # the scan reads this first character as structure
            self._state, self._depth = _IN, 0
        elif first in _SCALAR_START:
            self._state = _SCALAR_STATE
        else:
            raise ApiError(
                400, f"the request body is not JSON (at byte {self.offset + start})", 400
            )

    def _scan(self, buf: bytes | bytearray, pos: int) -> int:
        """Advance over `buf` from `pos` in the current state; where the scan stopped (the end
        of the value when the state is `_OUT` again)."""
        while pos < len(buf):
            if self._state == _SCALAR_STATE:
                match = _SCALAR.match(buf, pos)
                assert match is not None
                pos = match.end()
                if pos < len(buf):
                    self._state = _OUT
                break
            if self._state == _STRING:
                match = _STRING_BODY.match(buf, pos)
                assert match is not None
                pos = match.end()
                if pos >= len(buf) or buf[pos] != ord('"'):
                    break  # the string (or an escape) goes on in the next chunk
                pos += 1
                self._state = _IN if self._depth else _OUT
                if self._state == _OUT:
                    break
                continue
            found = _STRUCTURE.search(buf, pos)
            if found is None:
                return len(buf)
            pos = found.end()
            if self._step(buf[found.start()]):
                break
        return pos

    def _check_size(self, size: int) -> None:
        if size > self.max_value_bytes:
            raise too_large("a JSON value of the body", self.max_value_bytes)

    def _step(self, char: int) -> bool:
        """One structural character inside a container; True when it closes the value."""
        if char == ord('"'):
            self._state = _STRING
        elif char in b"{[":
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise ApiError(400, f"JSON nested deeper than {MAX_DEPTH} levels", 400)
        else:
            self._depth -= 1
            if self._depth == 0:
                self._state = _OUT
                return True
        return False

    def _take(self, value: bytes) -> tuple[bytes, int]:
        self._wrapped += 1
        self._check_size(len(value))
        size = self.blanks + len(value)
        self._value.clear()
        self._pos = 0
        self.blanks = 0
        return value, size
