"""Hostile and malformed input over raw sockets: the broker answers or closes that one connection,
never crashes, never allocates what a length prefix claims, and keeps serving everyone else.

After every case a connection that was open all along (`sentinel`) must still get an ApiVersions
answer. As Kafka's `SocketServer` does, frames that cannot be parsed, unknown API keys and
unserved versions close the connection; only ApiVersions answers an unknown version, with error
35 in a v0 body (KIP-511). Broken record batches are in `test_bad_batches.py`, the hypothesis
fuzzing of every advertised API in `test_fuzz_requests.py`.
"""

from __future__ import annotations

import errno
import random
import socket
import struct

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0

from infra.stack import BrokerProcess
from tests.e2e.broker_health import assert_still_serving, peak_rss_kib
from tests.e2e.raw_wire import RawConnection, decode_response, frame

pytestmark = [pytest.mark.e2e]

UNSUPPORTED_VERSION = 35
PROMPT_S = 5.0  # "promptly": the broker must act on what it already has, not wait for more


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes(module_broker: BrokerProcess, sentinel: RawConnection, seed: int) -> None:
    rng = random.Random(seed)
    noise = rng.randbytes(rng.choice([1, 7, 64, 4096, 70_000]))
    with RawConnection(module_broker.host, module_broker.port) as connection:
        assert _reset_while_sending(connection, noise) or connection.closed_by_peer(PROMPT_S)
    assert_still_serving(module_broker, sentinel)


def _reset_while_sending(connection: RawConnection, data: bytes) -> bool:
    """Send `data` and the end of the client's side; True when the broker closed first: having
    refused a size prefix it closes with the rest of the noise unread, so the kernel resets the
    connection, and the client's send or shutdown can meet that reset."""
    try:
        connection.send(data)
        connection.sock.shutdown(socket.SHUT_WR)
    except OSError as exc:
        if exc.errno in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN):
            return True
        raise
    return False


def _header_v1(api_key: int, version: int, correlation_id: int = 1, client: bytes = b"x") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client


MALFORMED_FRAMES = {
    "negative size": struct.pack(">i", -1) + b"\x00" * 16,
    "size below a header": struct.pack(">i", 3) + b"\x00\x12\x00",
    "zero size": struct.pack(">i", 0),
    "client id longer than frame": frame(struct.pack(">hhih", 18, 0, 1, 500) + b"abc"),
    "metadata body truncated": frame(_header_v1(3, 4) + struct.pack(">i", 2) + b"\x00\x05ab"),
    "metadata topic count 2^31-1": frame(_header_v1(3, 4) + struct.pack(">i", 2**31 - 1)),
    "metadata topic name length 32767": frame(
        _header_v1(3, 4) + struct.pack(">ih", 1, 32767) + b"abc"
    ),
    "flexible header bad tag section": frame(
        _header_v1(3, 12) + b"\xff\xff\xff\xff\xff\xff" + b"\x00" * 8
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED_FRAMES))
def test_malformed_frame_closes_connection(
    module_broker: BrokerProcess, sentinel: RawConnection, case: str
) -> None:
    with RawConnection(module_broker.host, module_broker.port) as connection:
        connection.send(MALFORMED_FRAMES[case])
        assert connection.closed_by_peer(PROMPT_S), f"{case}: connection left open"
    assert_still_serving(module_broker, sentinel)


def test_two_gib_length_prefix_closes_without_allocating(
    module_broker: BrokerProcess, sentinel: RawConnection
) -> None:
    before = peak_rss_kib(module_broker.pid)
    with RawConnection(module_broker.host, module_broker.port) as connection:
        connection.send(struct.pack(">i", 2**31 - 1) + _header_v1(0, 9) + b"\x00" * 1024)
        assert connection.closed_by_peer(PROMPT_S)
    assert_still_serving(module_broker, sentinel)
    assert peak_rss_kib(module_broker.pid) - before < 64 * 1024, "peak RSS grew by ≥ 64 MiB"


@pytest.mark.parametrize("api_key", [-1, 1000, 32767])
def test_unknown_api_key_closes_connection(
    module_broker: BrokerProcess, sentinel: RawConnection, api_key: int
) -> None:
    with RawConnection(module_broker.host, module_broker.port) as connection:
        connection.send(frame(_header_v1(api_key, 0)))
        assert connection.closed_by_peer(PROMPT_S)
    assert_still_serving(module_broker, sentinel)


def test_api_versions_unknown_version_answers_error_35_in_v0_body(
    module_broker: BrokerProcess, sentinel: RawConnection
) -> None:
    advertised = {
        (k.api_key, k.min_version, k.max_version) for k in sentinel.api_versions().api_keys
    }
    with RawConnection(module_broker.host, module_broker.port) as connection:
        connection.send(frame(_header_v1(18, 99, correlation_id=4242) + b"\x00" * 8))
        # KIP-511: the body has the v0 layout whatever version was asked, header v0.
        correlation_id, response = decode_response(ApiVersionsResponseV0, connection.read_frame())
        assert correlation_id == 4242
        assert response.error_code == UNSUPPORTED_VERSION
        assert {(k.api_key, k.min_version, k.max_version) for k in response.api_keys} == advertised
        connection.api_versions()  # the connection stays usable: the client retries lower
    assert_still_serving(module_broker, sentinel)


def test_fetch_v3_closes_connection(module_broker: BrokerProcess, sentinel: RawConnection) -> None:
    """Fetch starts at v4 here; an unserved version closes the connection, as Kafka."""
    topic = b"fetch-v3"
    body = struct.pack(">iiiii", -1, 100, 1, 1 << 20, 1) + struct.pack(">h", len(topic)) + topic
    body += struct.pack(">iiqi", 1, 0, 0, 1 << 20)
    with RawConnection(module_broker.host, module_broker.port) as connection:
        connection.send(frame(_header_v1(1, 3) + body))
        assert connection.closed_by_peer(PROMPT_S)
    assert_still_serving(module_broker, sentinel)
