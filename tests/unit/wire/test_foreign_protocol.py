"""An HTTP request line or a TLS handshake on the Kafka port is named, not read as a size."""

from __future__ import annotations

import struct

import pytest

from brokers.wire.framing import (
    HTTP_METHOD_PREFIXES,
    SIZE_PREFIX,
    FrameSizeError,
    NotKafkaProtocolError,
    check_request_size,
)

pytestmark = pytest.mark.unit


def frame_size(prefix: bytes, limit: int) -> int:
    """A size prefix decoded and checked as a connection's frame reader checks it."""
    size: int = SIZE_PREFIX.unpack(prefix)[0]
    check_request_size(size, limit)
    return size


LIMIT = 100 * 1024 * 1024


@pytest.mark.parametrize("request_line", [b"GET / HTTP/1.1", b"POST /v1", b"PUT /x", b"HEAD /"])
def test_an_http_request_line_is_named_as_http(request_line: bytes) -> None:
    with pytest.raises(NotKafkaProtocolError) as caught:
        frame_size(request_line[:4], LIMIT)
    message = str(caught.value)
    assert caught.value.protocol == "HTTP"
    method = request_line.split()[0].decode()
    assert f"an HTTP request ({method}) arrived on the Kafka protocol port" in message
    assert "HTTP requests are not served here" in message and "frame size" not in message


def test_every_http_prefix_is_over_any_plausible_limit() -> None:
    """So a real frame is never taken for HTTP: detection only runs over the limit."""
    assert min(struct.unpack(">i", p)[0] for p in HTTP_METHOD_PREFIXES) > 1024**3


def test_a_tls_client_hello_is_named_as_tls() -> None:
    with pytest.raises(NotKafkaProtocolError) as caught:
        frame_size(bytes([0x16, 0x03, 0x01, 0x02]), LIMIT)
    assert caught.value.protocol == "TLS"
    assert "TLS handshake arrived on a plaintext Kafka protocol port" in str(caught.value)


def test_a_plain_oversized_frame_still_reports_its_size() -> None:
    with pytest.raises(FrameSizeError) as caught:
        frame_size(struct.pack(">i", LIMIT + 1), LIMIT)
    assert not isinstance(caught.value, NotKafkaProtocolError)
    assert f"frame size {LIMIT + 1} over the limit" in str(caught.value)


def test_a_frame_within_the_limit_is_never_taken_for_http() -> None:
    size = struct.unpack(">i", b"GET ")[0]
    assert frame_size(b"GET ", size) == size
