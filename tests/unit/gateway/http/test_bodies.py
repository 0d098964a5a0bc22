"""Request bodies within bounds (pure): the JSON splitter fed bytes, the streamed and whole readers."""

from __future__ import annotations

import asyncio
import gzip
import json
import random
import zlib
from typing import Any

import pytest
import zstandard

from gateway.http.bodies import (
    MAX_DEPTH,
    READING_KEY,
    TRAILING,
    BodyReading,
    JsonSplitter,
    body_values,
    json_stream,
    read_body,
)
from gateway.http.errors import ApiError
from gateway.kafka.byte_budget import ByteBudget

pytestmark = pytest.mark.unit

BODY = (
    b' {"a": "x}\\"{[", "b": [1, {"c": "\\\\"}]}\n[1,2]  "s\\"}" 12 true null'
    b'{"z":{}} {"\xc3\xa9": "\xe2\x82\xac"}  \n'
)
VALUES = [
    {"a": 'x}"{[', "b": [1, {"c": "\\"}]},
    [1, 2],
    's"}',
    12,
    True,
    None,
    {"z": {}},
    {"é": "€"},
]


class _Request(dict[str, Any]):
    """What the readers use of a request: headers, Content-Length, the body's chunks and the
    request's own mapping (where its `BodyReading` is)."""

    def __init__(self, chunks: list[bytes], headers: dict[str, str] | None = None) -> None:
        super().__init__()
        self.content = self
        self.headers = headers or {}
        self.content_length = (
            int(self.headers["Content-Length"]) if "Content-Length" in self.headers else None
        )
        self._chunks = list(chunks)
        self.read_chunks = 0
        self.arrived = False  # aiohttp holds the whole body already (`is_eof`)

    def is_eof(self) -> bool:
        return self.arrived

    def read_nowait(self, n: int = -1) -> bytes:
        assert n == -1
        whole, self._chunks = b"".join(self._chunks), []
        return whole

    async def iter_any(self) -> Any:
        for chunk in self._chunks:
            self.read_chunks += 1
            yield chunk

    async def readany(self) -> bytes:
        if not self._chunks:
            return b""
        self.read_chunks += 1
        return self._chunks.pop(0)


def split(parts: list[bytes], max_value_bytes: int = 1 << 20) -> tuple[list[Any], int]:
    splitter = JsonSplitter(max_value_bytes)
    values = []
    for part in parts:
        values += splitter.feed(part)
    values += splitter.finish()
    assert sum(size for _, size in values) + splitter.blanks == sum(map(len, parts))
    return [json.loads(value) for value, _ in values], splitter.blanks


def test_values_split_wherever_the_chunks_are_cut() -> None:
    rng = random.Random(7)
    assert split([BODY])[0] == VALUES
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(BODY)), rng.randint(1, 12)))
        parts = [BODY[a:b] for a, b in zip([0, *cuts], [*cuts, len(BODY)], strict=True)]
        assert split(parts)[0] == VALUES, parts
    one_byte_at_a_time = [BODY[i : i + 1] for i in range(len(BODY))]
    assert split(one_byte_at_a_time) == (VALUES, 3)


def test_attack_13_invalid_utf8_is_refused_at_its_first_byte() -> None:
    splitter = JsonSplitter(1 << 20)
    with pytest.raises(ApiError) as error:
        splitter.feed(b"  \xff\xfe" + b"\xff" * 1000)
    assert error.value.status == 400 and "at byte 2" in error.value.message


def test_a_value_over_the_bound_is_413_before_it_is_held() -> None:
    splitter = JsonSplitter(1000)
    splitter.feed(b'{"value": "')
    with pytest.raises(ApiError) as error:
        for _ in range(100):
            splitter.feed(b"\xff" * 100)  # invalid UTF-8 inside a string: bounded all the same
    assert error.value.status == 413
    with pytest.raises(ApiError) as whole:
        JsonSplitter(1000).feed(b'{"v": "' + b"x" * 2000 + b'"}')
    assert whole.value.status == 413


def test_nesting_is_bounded() -> None:
    with pytest.raises(ApiError) as error:
        JsonSplitter(1 << 20).feed(b"[" * (MAX_DEPTH + 1))
    assert error.value.status == 400
    assert split([b"[" * MAX_DEPTH + b"]" * MAX_DEPTH])[0] != []


def test_a_body_cut_inside_a_value_is_400() -> None:
    splitter = JsonSplitter(1 << 20)
    splitter.feed(b'{"a": 1}\n{"b": ')
    with pytest.raises(ApiError) as error:
        splitter.finish()
    assert error.value.status == 400


def stream_values(chunks: list[bytes], **headers: str) -> list[tuple[object, int]]:
    async def run() -> list[tuple[object, int]]:
        request = _Request(chunks, headers)
        return [item async for item in json_stream(request)]  # type: ignore[arg-type]

    return asyncio.run(run())


def test_json_stream_counts_every_byte_and_the_trailing_blanks() -> None:
    body = ' {"a": 1}\n{"b": "é"}\n\n{"c": [1, 2]}\n'.encode()
    for cut in range(1, len(body)):
        values = stream_values([body[:cut], body[cut:]])
        assert [v for v, _ in values if v is not TRAILING] == [{"a": 1}, {"b": "é"}, {"c": [1, 2]}]
        assert values[-1] == (TRAILING, 1)
        assert sum(size for _, size in values) == len(body), cut


def test_a_whole_value_that_is_not_utf8_json_ends_the_stream_with_400() -> None:
    for bad in (b'{"a": "\xff"}', b'{"a" 1}', b"{nope}"):
        with pytest.raises(ApiError) as error:
            stream_values([bad])
        assert error.value.status == 400, bad


def test_unknown_content_encodings_are_415_before_the_body_is_read() -> None:
    request = _Request([b"{}"], {"Content-Encoding": "br"})
    for read in (read_body(request, 100), anext(json_stream(request))):  # type: ignore[arg-type]
        with pytest.raises(ApiError) as error:
            asyncio.run(read)  # type: ignore[arg-type]
        assert error.value.status == 415
    assert request.read_chunks == 0
    for other in ("compress", "x-gzip", "zstd, gzip", "\u00e9"):
        refused = _Request([b"{}"], {"Content-Encoding": other})
        with pytest.raises(ApiError) as error:
            asyncio.run(read_body(refused, 100))  # type: ignore[arg-type]
        assert error.value.status == 415 and refused.read_chunks == 0
    encoded = {
        "gzip": gzip.compress(b"{}"),
        "GZIP": gzip.compress(b"{}"),
        "deflate": zlib.compress(b"{}"),
        "zstd": zstandard.ZstdCompressor().compress(b"{}"),
        "identity": b"{}",
    }
    for accepted, body in encoded.items():  # decoded here (aiohttp's own decoding is off)
        request = _Request([body[:3], body[3:]], {"Content-Encoding": accepted})
        assert asyncio.run(read_body(request, 100)) == b"{}", accepted  # type: ignore[arg-type]
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw = raw_deflate.compress(b"{}") + raw_deflate.flush()
    request = _Request([raw], {"Content-Encoding": "deflate"})  # raw deflate, as some send it
    assert asyncio.run(read_body(request, 100)) == b"{}"  # type: ignore[arg-type]


def _bombs(size: int, plain: bytes = b"") -> dict[str, bytes]:
    plain = plain or b" " * size
    return {
        "gzip": gzip.compress(plain, 9),
        "deflate": zlib.compress(plain, 9),
        "zstd": zstandard.ZstdCompressor(level=19).compress(plain),
    }


def test_compression_bombs_stop_at_the_limit_in_bounded_steps() -> None:
    for encoding, bomb in _bombs(64 * 1024 * 1024).items():
        assert len(bomb) < 200_000, encoding
        request = _Request([bomb], {"Content-Encoding": encoding})
        with pytest.raises(ApiError) as error:
            asyncio.run(read_body(request, 1024 * 1024))  # type: ignore[arg-type]
        assert error.value.status == 413, encoding
    one_value = b'["' + b"x" * (64 * 1024 * 1024)
    for encoding, bomb in _bombs(0, one_value).items():  # streamed: a value's bound
        stream = _Request([bomb], {"Content-Encoding": encoding})
        with pytest.raises(ApiError) as error:
            asyncio.run(anext(json_stream(stream, 1024 * 1024)))  # type: ignore[arg-type]
        assert error.value.status == 413, encoding


def test_a_body_that_is_not_its_coding_is_400() -> None:
    good = {e: b[:-4] for e, b in _bombs(1000).items()}  # cut short
    bad = {"gzip": b"not gzip at all", "deflate": b"\x78\x9cnot deflate", "zstd": b"nope" * 8}
    for cases in (good, bad):
        for encoding, body in cases.items():
            request = _Request([body], {"Content-Encoding": encoding})
            with pytest.raises(ApiError) as error:
                asyncio.run(read_body(request, 1 << 20))  # type: ignore[arg-type]
            assert error.value.status == 400, (encoding, body[:10])
    trailing = _Request([gzip.compress(b"{}") + b"junk"], {"Content-Encoding": "gzip"})
    with pytest.raises(ApiError) as error:
        asyncio.run(read_body(trailing, 1 << 20))  # type: ignore[arg-type]
    assert error.value.status == 400


def test_a_body_that_stops_arriving_is_408() -> None:
    class Stalled(_Request):
        async def readany(self) -> bytes:
            if self._chunks:
                return await super().readany()
            await asyncio.sleep(3600)
            return b""

    request = Stalled([b'{"a": '])
    request[READING_KEY] = BodyReading(timeout_s=0.05)
    with pytest.raises(ApiError) as error:
        asyncio.run(read_body(request, 100))  # type: ignore[arg-type]
    assert error.value.status == 408


def test_read_body_stops_at_its_limit() -> None:
    declared = _Request([b"x" * 10] * 100, {"Content-Length": "1000"})
    with pytest.raises(ApiError) as error:
        asyncio.run(read_body(declared, 100))  # type: ignore[arg-type]
    assert error.value.status == 413 and declared.read_chunks == 0  # refused before reading
    chunked = _Request([b"x" * 10] * 100)
    with pytest.raises(ApiError) as error:
        asyncio.run(read_body(chunked, 100))  # type: ignore[arg-type]
    assert error.value.status == 413 and chunked.read_chunks == 11  # no further than the limit


def test_body_values_of_a_whole_body() -> None:
    async def run(raw: bytes) -> list[tuple[object, int]]:
        return [item async for item in body_values(raw)]

    values = asyncio.run(run(BODY * 5000))  # several slices of the event loop's time
    assert [v for v, _ in values if v is not TRAILING] == VALUES * 5000
    assert sum(size for _, size in values) == len(BODY) * 5000


def test_a_zstd_frame_asking_for_a_huge_window_is_400_not_allocated() -> None:
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=27)
    streaming = zstandard.ZstdCompressor(compression_params=params).compressobj()  # size unknown
    huge = streaming.compress(b"{}" * 100_000) + streaming.flush()
    assert zstandard.get_frame_parameters(huge).window_size == 128 * 1024 * 1024
    request = _Request([huge], {"Content-Encoding": "zstd"})
    with pytest.raises(ApiError) as error:
        asyncio.run(read_body(request, 1 << 20))  # type: ignore[arg-type]
    assert error.value.status == 400
    normal = zstandard.ZstdCompressor(level=19).compress(b"{}" * 100_000)
    request = _Request([normal], {"Content-Encoding": "zstd"})
    assert asyncio.run(read_body(request, 1 << 20)) == b"{}" * 100_000  # type: ignore[arg-type]


def test_a_body_holds_the_tenants_pool_and_never_more_than_all_of_it() -> None:
    budget = ByteBudget(100)

    async def read(chunks: list[bytes], limit: int) -> tuple[bytes, int]:
        request = _Request(chunks)
        reading = BodyReading(timeout_s=0.05, budget=budget)
        request[READING_KEY] = reading
        try:
            body = await read_body(request, limit)  # type: ignore[arg-type]
            return body, budget.used  # held until the request is answered
        finally:
            reading.release()

    assert asyncio.run(read([b"x" * 40, b"y" * 40], 1000)) == (b"x" * 40 + b"y" * 40, 80)
    assert budget.used == 0  # given back with the answer
    with pytest.raises(ApiError) as error:  # more than the whole pool: it could only wait
        asyncio.run(read([b"x" * 60, b"y" * 60], 1000))
    assert error.value.status == 413 and budget.used == 0
    other = budget.try_take(90)  # another request of the tenant holds most of it
    assert other is not None
    with pytest.raises(ApiError) as waited:
        asyncio.run(read([b"x" * 40], 1000))
    assert waited.value.status == 429 and budget.used == 90
    other.release()


def test_a_body_that_has_arrived_is_taken_without_a_read_within_the_same_bounds() -> None:
    """The usual small body, all buffered by aiohttp: taken at once (no read, no wait), still
    413 past the limit, its bytes still drawn from the tenant's pool; a coded body is read and decoded the ordinary
    way."""
    request = _Request([b'{"a":', b"1}"])
    request.arrived = True
    budget = ByteBudget(1000)
    request[READING_KEY] = BodyReading(budget=budget)
    assert asyncio.run(read_body(request, 100)) == b'{"a":1}'  # type: ignore[arg-type]
    assert request.read_chunks == 0
    assert budget.used == len(b'{"a":1}')
    too_big = _Request([b"x" * 101])
    too_big.arrived = True
    with pytest.raises(ApiError) as error:
        asyncio.run(read_body(too_big, 100))  # type: ignore[arg-type]
    assert error.value.status == 413
    coded = _Request([gzip.compress(b"{}")], {"Content-Encoding": "gzip"})
    coded.arrived = True
    assert asyncio.run(read_body(coded, 100)) == b"{}"  # type: ignore[arg-type]
    assert coded.read_chunks == 1


def test_bytes_granted_in_the_turn_a_wait_ends_are_given_back() -> None:
    """A wait for the tenant's pool that ends (its timeout, or the request cancelled because the
    client left) in the same turn of the loop as the grant: the granted bytes go back to the
    pool, not to nobody (every such race shrank the tenant's pool until a restart)."""
    budget = ByteBudget(10)

    async def scenario() -> None:
        first = budget.try_take(10)
        assert first is not None
        reading = BodyReading(timeout_s=30, budget=budget)
        waiting = asyncio.create_task(reading.hold(5))
        await asyncio.sleep(0)  # it waits for the pool
        first.release()  # the grant is queued for the next turn ...
        asyncio.get_running_loop().call_soon(waiting.cancel)  # ... the wait's end after it
        with pytest.raises(asyncio.CancelledError):
            await waiting
        reading.release()
        await asyncio.sleep(0)  # any delivery still queued has run

    asyncio.run(scenario())
    assert budget.used == 0
