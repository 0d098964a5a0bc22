"""Request bodies of the tenant HTTP API, read within bounds (docs/security.md, "HTTP decoding").

Owns: reading a request's body without ever holding more than a bound of it — `read_body` (the
whole body of a non-streamed request: a declared `Content-Length` over the limit is refused 413
before a byte is read, a chunked body is refused 413 as soon as it passes the limit), `read_json`
(a small control body, at most `MAX_CONTROL_BODY_BYTES`), `json_stream` (the JSON values of a
streamed produce body as they arrive) and `body_values` (those of a whole body) — and the
`Content-Encoding`s accepted: identity, gzip and deflate, which aiohttp decodes in bounded steps
as the body is read (so the limits apply to decoded bytes and a compression bomb stops at them);
anything else is 415 before the body is read.

Streamed values are split by `JsonSplitter` on raw bytes, before any decoding: it follows
strings, escapes and nesting with a few regular-expression steps per structural character, so
each byte is looked at once however the body is cut into chunks (no re-parse of a growing buffer),
and it keeps only the bytes of the value being read: a value over `max_value_bytes` is 413, nesting
deeper than `MAX_DEPTH` or a byte that cannot start a JSON value (invalid UTF-8, say) is 400 at
once, whitespace between values is counted (it is metered) but not kept. A whole value is then
decoded as strict UTF-8 JSON; one that is not ends the stream with 400.
Errors are `ApiError`s, answered as the API's error JSON. `JsonSplitter` is pure and not
thread-safe; the readers run on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from gateway.http.errors import ApiError

MAX_BODY_BYTES = 16 * 1024 * 1024  # a non-streamed body (one record, or several back to back)
MAX_CONTROL_BODY_BYTES = 1024 * 1024  # topics, configs, consumer settings, offsets
MAX_VALUE_BYTES = 8 * 1024 * 1024  # one value of a streamed produce body
MAX_DEPTH = 128
SLICE_BYTES = 64 * 1024  # a whole body is split this much per turn of the event loop
ACCEPTED_ENCODINGS = frozenset({"", "identity", "gzip", "deflate"})
TRAILING: Any = object()  # the whitespace after a stream's last value (metered, not a record)

_BLANK = re.compile(rb"[ \t\r\n]*")
_STRUCTURE = re.compile(rb'[{}\[\]"]')
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_SCALAR = re.compile(rb'[^ \t\r\n{}\[\],:"]*')
_SCALAR_START = frozenset(b"-0123456789tfn")
_OUT, _IN, _STRING, _SCALAR_STATE = range(4)


def too_large(what: str, limit: int) -> ApiError:
    return ApiError(413, f"{what} is larger than {limit} bytes", 413)


def check_encoding(request: web.BaseRequest) -> None:
    """415 for a `Content-Encoding` the API does not decode (before the body is read)."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ACCEPTED_ENCODINGS:
        raise ApiError(
            415, f"Content-Encoding {encoding!r} is not accepted (identity, gzip, deflate)", 415
        )


async def read_body(request: web.BaseRequest, limit: int) -> bytes:
    """The whole body, at most `limit` decoded bytes (413 beyond, as soon as it is known)."""
    check_encoding(request)
    declared = request.content_length
    if declared is not None and declared > limit and "Content-Encoding" not in request.headers:
        raise too_large("the request body", limit)
    body = bytearray()
    while chunk := await request.content.readany():
        body += chunk
        if len(body) > limit:
            raise too_large("the request body", limit)
    return bytes(body)


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


async def body_values(
    raw: bytes, max_value_bytes: int = MAX_BODY_BYTES
) -> AsyncIterator[tuple[Any, int]]:
    """The JSON values of a whole body, as `json_stream` gives those of a streamed one: split
    `SLICE_BYTES` at a time, with a turn of the event loop between slices."""
    splitter = JsonSplitter(max_value_bytes)
    for start in range(0, len(raw), SLICE_BYTES):
        for value, size in splitter.feed(raw[start : start + SLICE_BYTES]):
            yield _decoded(value), size
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
    check_encoding(request)
    splitter = JsonSplitter(max_value_bytes)
    async for chunk in request.content.iter_any():
        for value, size in splitter.feed(chunk):
            yield _decoded(value), size
    for value, size in splitter.finish():
        yield _decoded(value), size
    if splitter.blanks:
        yield TRAILING, splitter.blanks


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

    def feed(self, data: bytes) -> list[tuple[bytes, int]]:
        """The values `data` completes, each with its size (leading whitespace included)."""
        done: list[tuple[bytes, int]] = []
        start = 0
        if self._state != _OUT:  # a value goes on from the last chunk
            start = self._continue(data)
            if self._state == _OUT:
                done.append(self._take(bytes(self._value)))
        while start < len(data):
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
        self._check_size(len(value))
        size = self.blanks + len(value)
        self._value.clear()
        self._pos = 0
        self.blanks = 0
        return value, size
