"""APIs the gateway does not serve are refused, never forwarded (fail closed).

After authentication, every inter-broker, controller, admin and unknown API key (every key 0–92
the gateway does not advertise, plus 999 and 32767) closes the connection without an answer;
the gateway's `pier_gateway_refused_requests_total` counts each; the broker never sees any of
them: its per-API request counters (`kafka_network_requests_total`) move only for APIs the
gateway serves (its own background traffic), and its malformed-request counter, which a
forwarded request the broker cannot serve would raise, stays put. A Fetch with a replica id is
refused the same way; a ListOffsets with one is answered CLUSTER_AUTHORIZATION_FAILED by the
gateway. Before authentication, anything but ApiVersions and SASL closes the connection, and a
600 KiB frame is refused on its size prefix alone: the gateway closes while most of it is unsent.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from kio.index import load_request_schema
from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.list_offsets.v7.request import ListOffsetsRequest
from kio.schema.list_offsets.v7.response import ListOffsetsResponse
from prometheus_client.parser import text_string_to_metric_families

from infra.probes import free_port
from tests.e2e.gateway.sasl_wire import (
    advertised_ranges,
    closed_without_answer,
    exchange,
    login,
    open_raw,
)
from tests.e2e.raw_wire import decode_response, request_bytes
from tests.e2e.request_fuzz import has_schema, plain_entity, seed_request
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e

WAIT_S = 10.0
CONTROL_VERSIONS = {4: 5, 5: 3, 6: 7, 7: 3}  # LeaderAndIsr … ControlledShutdown (no kio schema)
NAMED_REFUSALS = (4, 5, 6, 7, 27, 34, 35, 43, 45, 46, 48, 49, 50, 51, 57, 64, 67, 74)
UNKNOWN_KEYS = (93, 999, 32767)
PRE_AUTH_APIS = frozenset({17, 18, 36})
Samples = Mapping[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    # The storage sampler's DescribeLogDirs would move the broker's counter for key 35: once an
    # hour is never during this module.
    with GatewayStack(
        Path(tmp_path_factory.mktemp("refused")),
        gateway_settings={"storage.sample.interval.ms": "3600000"},
        broker_metrics_port=free_port(),
        gateway_metrics_port=free_port(),
    ) as stack:
        yield stack


def scrape(host: str, port: int | None) -> Samples:
    assert port is not None
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def broker_samples(stack: GatewayStack) -> Samples:
    assert stack.broker is not None
    return scrape(stack.broker.host, stack.broker.metrics_port)


def refused_count(stack: GatewayStack, tenant: str, reason: str) -> float:
    assert stack.gateway is not None
    samples = scrape(stack.gateway.host, stack.gateway.metrics_port)
    key = (
        "pier_gateway_refused_requests_total",
        frozenset({("tenant", tenant), ("reason", reason)}),
    )
    return samples.get(key, 0.0)


def raw_request(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    """A request of any key: kio's seed where kio has a schema, else a v2 header and junk."""
    if has_schema(api_key, version):
        return seed_request(api_key, version, correlation_id)
    client_id = b"pier-e2e-raw"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return header + b"\x00" + b"\x00" * 16  # empty tagged fields, then a zeroed body


def some_version(api_key: int) -> int:
    if api_key in CONTROL_VERSIONS:
        return CONTROL_VERSIONS[api_key]
    versions = [v for v in range(20) if has_schema(api_key, v)]
    return versions[-1] if versions else 0


def broker_api_name(api_key: int) -> str | None:
    """The broker's metric label for an API: Kafka's name, as kio's schema class has it."""
    version = some_version(api_key)
    if not has_schema(api_key, version):
        return None
    return str(load_request_schema(api_key, version).__name__).removesuffix("Request")


def served_names(stack: GatewayStack) -> set[str]:
    with login(stack, "acme") as connection:
        keys = advertised_ranges(connection)
    return {name for key in keys if (name := broker_api_name(key)) is not None}


def unchanged_broker_counters(before: Samples, after: Samples, served: set[str]) -> list[str]:
    """Broker counters that moved and that no served API explains."""
    moved = []
    for (name, labels), value in after.items():
        if name == "kafka_network_requests_total" and dict(labels)["request"] in served:
            continue
        if name not in ("kafka_network_requests_total", "kafka_network_malformed_requests_total"):
            continue
        if before.get((name, labels), 0.0) != value:
            moved.append(f"{name}{dict(labels)}: {before.get((name, labels), 0.0)} -> {value}")
    return moved


def test_unserved_apis_are_refused_and_never_forwarded(gateway_stack: GatewayStack) -> None:
    with login(gateway_stack, "acme") as connection:
        advertised = advertised_ranges(connection)
    refused_keys = sorted(
        {k for k in range(93) if k not in advertised} | set(NAMED_REFUSALS) | set(UNKNOWN_KEYS)
    )
    assert not set(NAMED_REFUSALS) & set(advertised), "an inter-broker or admin API is advertised"
    served = served_names(gateway_stack)
    before_broker = broker_samples(gateway_stack)
    before_refused = refused_count(gateway_stack, "acme", "api")
    answered = []
    for api_key in refused_keys:
        with login(gateway_stack, "acme") as connection:
            if not closed_without_answer(
                connection, raw_request(api_key, some_version(api_key)), WAIT_S
            ):
                answered.append(api_key)
    assert not answered, f"api keys answered instead of refused: {answered}"
    after_refused = refused_count(gateway_stack, "acme", "api")
    assert after_refused - before_refused == len(refused_keys)
    moved = unchanged_broker_counters(before_broker, broker_samples(gateway_stack), served)
    assert not moved, f"the broker saw refused requests: {moved}"


def test_unserved_versions_of_served_apis_are_refused(gateway_stack: GatewayStack) -> None:
    """A version past the advertised cap is refused by its header, never forwarded. Produce and
    Fetch are advertised up to Kafka 4.1's highest (v13, v18), where kio's schemas end too, so the
    request is the highest version's body under the next version's number."""
    with login(gateway_stack, "acme") as connection:
        advertised = advertised_ranges(connection)
    for api_key in (0, 1):
        top = advertised[api_key][1]
        assert has_schema(api_key, top)
        payload = bytearray(seed_request(api_key, top))
        struct.pack_into(">h", payload, 2, top + 1)  # the header's request_api_version
        with login(gateway_stack, "acme") as connection:
            assert closed_without_answer(connection, bytes(payload), WAIT_S), api_key


@pytest.mark.parametrize("replica_id", [0, 1, 12345])
def test_replica_fetch_is_refused(gateway_stack: GatewayStack, replica_id: int) -> None:
    request = dataclasses.replace(
        plain_entity(FetchRequest),
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=10),
    )
    served = served_names(gateway_stack) - {"Fetch"}
    before_broker = broker_samples(gateway_stack)
    before_refused = refused_count(gateway_stack, "acme", "fetch")
    with login(gateway_stack, "acme") as connection:
        assert closed_without_answer(connection, request_bytes(request, 7), WAIT_S)
    assert refused_count(gateway_stack, "acme", "fetch") == before_refused + 1
    moved = unchanged_broker_counters(before_broker, broker_samples(gateway_stack), served)
    assert not moved, f"the broker saw the replica fetch: {moved}"


def test_list_offsets_with_a_replica_id_is_answered_by_the_gateway(
    gateway_stack: GatewayStack,
) -> None:
    request = dataclasses.replace(plain_entity(ListOffsetsRequest), replica_id=1)
    with login(gateway_stack, "acme") as connection:
        outcome = exchange(connection, request_bytes(request, 7), WAIT_S)
    assert outcome.payload is not None
    correlation_id, response = decode_response(ListOffsetsResponse, outcome.payload)
    assert correlation_id == 7
    codes = {p.error_code for t in response.topics for p in t.partitions}
    assert codes == {31}  # CLUSTER_AUTHORIZATION_FAILED


def test_before_authentication_only_api_versions_and_sasl_are_answered(
    gateway_stack: GatewayStack,
) -> None:
    with login(gateway_stack, "acme") as connection:
        advertised = advertised_ranges(connection)
    keys = sorted((set(advertised) - PRE_AUTH_APIS) | {4, 43, 999})
    before = refused_count(gateway_stack, "", "api")
    answered = []
    for api_key in keys:
        with open_raw(gateway_stack) as connection:
            version = advertised[api_key][1] if api_key in advertised else some_version(api_key)
            if not closed_without_answer(connection, raw_request(api_key, version), WAIT_S):
                answered.append(api_key)
    assert not answered, f"answered before authentication: {answered}"
    assert refused_count(gateway_stack, "", "api") == before + len(keys)
    with open_raw(gateway_stack) as connection:  # ApiVersions itself is answered pre-auth
        assert connection.api_versions().api_keys


def test_oversized_frame_before_authentication_is_closed_on_its_prefix(
    gateway_stack: GatewayStack,
) -> None:
    size = 600 * 1024
    before = refused_count(gateway_stack, "", "frame:")
    with open_raw(gateway_stack) as connection:
        # Only the prefix and a header go out: a gateway waiting for all 600 KiB would hang here.
        connection.send(struct.pack(">i", size) + raw_request(3, 12)[:32])
        assert connection.closed_by_peer(WAIT_S), "a 600 KiB frame before login was not refused"
    assert refused_count(gateway_stack, "", "frame:") == before + 1


def test_raw_connection_helper_sees_a_served_api_answered(gateway_stack: GatewayStack) -> None:
    """The refusal checks above mean something: a served API on the same path is answered."""
    with login(gateway_stack, "acme") as connection:
        outcome = exchange(connection, seed_request(3, 12), WAIT_S)
        assert outcome.payload is not None and outcome.payload[:4] == (7).to_bytes(4, "big")
