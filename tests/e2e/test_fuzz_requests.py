"""Hypothesis fuzzing of every API the broker advertises: mutated valid requests never take it down.

The API list and version ranges come from the broker's own ApiVersions answer. For each, a
well-formed seed request (kio schema, plain field values) at a drawn advertised version is mutated
(bit flips, overwrites, hostile int32 lengths, truncation, insertion) and sent as one complete
frame on a fresh connection; the broker may answer, close, or hold the request (a mutated Fetch
may wait), but afterwards its process is alive and a connection open since before the test still
gets ApiVersions answered. The quick run keeps to 60 examples (~5 s); the `slow` run does 1,000.
"""

from __future__ import annotations

import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.stack import BrokerProcess
from tests.e2e.broker_health import assert_still_serving
from tests.e2e.raw_wire import RawConnection, frame
from tests.e2e.request_fuzz import has_schema, mutated_payloads, seed_request

pytestmark = [pytest.mark.e2e]

ANSWER_WAIT_S = 0.2
_FIXTURES_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


def advertised(sentinel: RawConnection) -> list[tuple[int, int]]:
    """(api key, version) for every advertised version that has a kio schema."""
    return [
        (k.api_key, version)
        for k in sentinel.api_versions().api_keys
        for version in range(k.min_version, k.max_version + 1)
        if has_schema(k.api_key, version)
    ]


@st.composite
def mutated_requests(draw: st.DrawFn, apis: list[tuple[int, int]]) -> bytes:
    api_key, version = draw(st.sampled_from(apis))
    return draw(mutated_payloads(seed_request(api_key, version)))


def send_and_drain(broker: BrokerProcess, payload: bytes) -> None:
    """Send one framed request, give the broker a moment to answer or close, then hang up."""
    with RawConnection(broker.host, broker.port) as connection:
        try:
            connection.send(frame(payload))
            connection.closed_by_peer(ANSWER_WAIT_S)
        except OSError:
            pass  # the broker closed first: allowed
        connection.sock.shutdown(socket.SHUT_RDWR)


def run_fuzz(broker: BrokerProcess, sentinel: RawConnection, examples: int) -> None:
    apis = advertised(sentinel)
    assert apis, "the broker advertises no APIs"

    @settings(max_examples=examples, deadline=None, suppress_health_check=_FIXTURES_OK)
    @given(payload=mutated_requests(apis))
    def property_broker_survives(payload: bytes) -> None:
        send_and_drain(broker, payload)
        assert_still_serving(broker, sentinel)

    property_broker_survives()


def test_mutated_requests_of_every_api(
    module_broker: BrokerProcess, sentinel: RawConnection
) -> None:
    run_fuzz(module_broker, sentinel, examples=60)


@pytest.mark.slow
def test_mutated_requests_of_every_api_long(
    module_broker: BrokerProcess, sentinel: RawConnection
) -> None:
    run_fuzz(module_broker, sentinel, examples=1_000)


def test_seed_requests_are_answered(module_broker: BrokerProcess, sentinel: RawConnection) -> None:
    """The unmutated seeds are well-formed: every advertised version is answered, not refused as
    malformed, so the mutations start from requests the broker really parses."""
    unanswered: list[tuple[int, int]] = []
    for api_key, version in advertised(sentinel):
        with RawConnection(module_broker.host, module_broker.port) as connection:
            connection.send(frame(seed_request(api_key, version)))
            try:
                payload = connection.read_frame(timeout=10)
            except ConnectionError:
                unanswered.append((api_key, version))
                continue
            assert payload[:4] == (7).to_bytes(4, "big"), f"api {api_key} v{version}"
    assert not unanswered, f"(api key, version) of well-formed requests not answered: {unanswered}"
    assert_still_serving(module_broker, sentinel)
