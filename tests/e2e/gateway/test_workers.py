"""`pier gateway --workers 2` (issue 24 items 1 and 3): one listener set, two worker processes.

A real broker, tenant store and `pier gateway` with `workers=2`: Kafka clients (SASL PLAIN and
SCRAM) connect, produce and consume, and their sessions are held by both workers (the tenant
store's connection holdings, per worker gateway id `<id>.w0` / `<id>.w1`); HTTP v2 consumer
instances named so that each worker owns some answer 20 polls and commits made on fresh
connections (the kernel spreads them over the workers) without a 404; another service account of
the tenant gets 404 for them on every worker; a worker SIGKILLed is restarted by the parent and
the instances it owned are 404 afterwards (the other worker's still answer); the operator's list
names every worker's instances and a delete reaches the owner; SIGTERM stops the parent and every
worker with exit 0.
"""

from __future__ import annotations

import base64
import os
import signal
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, Producer

from gateway.http.worker_routing import owner_of
from gateway.supervisor import WORKER_ENV
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, http_url, wait_http
from tests.gateway_stack import OPERATOR, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
WORKERS = 2
V2 = "application/vnd.kafka.v2+json"


def worker_pids(parent: int) -> dict[int, int]:
    """{worker index: pid} of the parent's live worker processes (from /proc)."""
    found: dict[int, int] = {}
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    for pid in map(int, children):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        for entry in environ:
            if entry.startswith(WORKER_ENV.encode() + b"="):
                found[int(entry.split(b"=", 1)[1].split(b"/")[0])] = pid
    return found


def ready_lines(stack: GatewayStack, text: str) -> int:
    assert stack.gateway is not None
    return stack.gateway.log_path.read_text(errors="replace").count(text)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(
        Path(tmp_path_factory.mktemp("workers")),
        {"workers": str(WORKERS), "consumer.instance.timeout.ms": "120000"},
    ) as running:
        wait_until(
            lambda: ready_lines(running, "pier gateway ready") == 1,
            what="the supervisor's ready line",
            timeout=60,
        )
        wait_http(running)
        yield running


def fresh(creds: tuple[str, str]) -> requests.Session:
    """A session that opens a new connection per request (so requests spread over workers)."""
    session = requests.Session()
    session.auth = creds
    session.headers["Connection"] = "close"
    return session


def names_per_worker(group: str) -> dict[int, str]:
    names: dict[int, str] = {}
    i = 0
    while len(names) < WORKERS:
        name = f"inst-{i}"
        names.setdefault(owner_of(group, name, WORKERS), name)
        i += 1
    return names


def create(base: str, creds: tuple[str, str], group: str, name: str) -> requests.Response:
    return fresh(creds).post(
        f"{base}/consumers/{group}",
        json={"name": name, "format": "binary", "auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
        timeout=30,
    )


def test_kafka_sessions_spread_over_both_workers(stack: GatewayStack, topic_name: str) -> None:
    producers = []
    for i in range(12):
        mechanism = ("PLAIN", "SCRAM-SHA-256")[i % 2]
        producer = Producer(stack.client_config("acme", mechanism))
        producer.produce(topic_name, f"r{i}".encode())
        assert producer.flush(30) == 0
        producers.append(producer)

    def holders() -> set[str]:
        with stack.store() as store:
            return {gw.split("/")[0] for gw, held in store.gateway_connections().items()}

    port = stack.gateway.port if stack.gateway is not None else 0
    expected = {f"gw-{port}.w{k}" for k in range(WORKERS)}
    wait_until(lambda: expected <= holders(), what=f"sessions held by {expected}", timeout=20)
    consumer = Consumer(
        stack.client_config(
            "acme", "SCRAM-SHA-512", **{"group.id": "w", "auto.offset.reset": "earliest"}
        )
    )
    consumer.subscribe([topic_name])
    seen: set[bytes] = set()

    def read_all() -> bool:
        seen.update(m.value() or b"" for m in consumer.consume(12, 1) if m.error() is None)
        return len(seen) == 12

    try:
        wait_until(read_all, what="the 12 records read back", timeout=60)
    finally:
        consumer.close()
    assert seen == {f"r{i}".encode() for i in range(12)}


def test_http_instances_answer_on_any_worker(stack: GatewayStack, topic_name: str) -> None:
    acme = TenantHttp(stack, stack.credentials["acme"])
    acme.create_topic(topic_name)
    for i in range(20):
        value = base64.b64encode(f"v{i}".encode()).decode()
        answer = acme.produce(topic_name, {"value": {"type": "BINARY", "data": value}})
        assert answer.status_code == 200, answer.text
    base = http_url(stack)
    creds = (stack.credentials["acme"].key_id, stack.credentials["acme"].secret)
    for owner in range(WORKERS):
        group = f"{topic_name}-g{owner}"  # a group each: both read from the start
        name = names_per_worker(group)[owner]
        made = create(base, creds, group, name)
        assert made.status_code == 200, made.text
        uri = made.json()["base_uri"]
        assert uri == f"{base}/consumers/{group}/instances/{name}"
        subscribed = fresh(creds).post(
            uri + "/subscription", json={"topics": [topic_name]}, headers={"Content-Type": V2}
        )
        assert subscribed.status_code == 204, subscribed.text
        again = create(base, creds, group, name)  # the same name is one instance, on its owner
        assert again.status_code == 409, again.text
        values: list[str] = []
        for _ in range(20):
            polled = fresh(creds).get(
                uri + "/records?timeout=500",
                headers={"Accept": "application/vnd.kafka.binary.v2+json"},
                timeout=30,
            )
            assert polled.status_code == 200, (owner, polled.text)
            values += [base64.b64decode(r["value"]).decode() for r in polled.json()]
            committed = fresh(creds).post(uri + "/offsets", headers={"Content-Type": V2})
            assert committed.status_code == 204, (owner, committed.text)
        assert values == [f"v{i}" for i in range(20)], owner
        deleted = fresh(creds).delete(uri, timeout=30)
        assert deleted.status_code == 204, deleted.text


def test_owner_check_holds_across_workers(stack: GatewayStack, topic_name: str) -> None:
    with stack.store() as store:
        other = stack.add_tenant(store, "acme", name=f"other-{topic_name[-8:]}")
    base = http_url(stack)
    creds = (stack.credentials["acme"].key_id, stack.credentials["acme"].secret)
    intruder = (other.key_id, other.secret)
    group = f"{topic_name}-g"
    for name in names_per_worker(group).values():
        assert create(base, creds, group, name).status_code == 200
        uri = f"{base}/consumers/{group}/instances/{name}"
        for _ in range(10):
            answer = fresh(intruder).get(uri + "/subscription", timeout=30)
            assert answer.status_code == 404, answer.text
            assert answer.json()["error_code"] == 40403
            own = fresh(creds).get(uri + "/subscription", timeout=30)
            assert own.status_code == 200, own.text


def test_killed_worker_is_restarted_and_its_instances_are_gone(
    stack: GatewayStack, topic_name: str
) -> None:
    assert stack.gateway is not None
    base = http_url(stack)
    creds = (stack.credentials["acme"].key_id, stack.credentials["acme"].secret)
    group = f"{topic_name}-g"
    names = names_per_worker(group)
    for name in names.values():
        assert create(base, creds, group, name).status_code == 200
    before = worker_pids(stack.gateway.pid)
    assert sorted(before) == list(range(WORKERS))
    os.kill(before[1], signal.SIGKILL)
    wait_until(
        lambda: (
            worker_pids(stack.gateway.pid).get(1) not in (None, before[1])  # type: ignore[union-attr]
            and ready_lines(stack, "pier gateway worker 1 ready") >= 2
        ),
        what="worker 1 restarted",
        timeout=60,
    )
    assert worker_pids(stack.gateway.pid)[0] == before[0]
    for _ in range(10):
        dead = fresh(creds).get(f"{base}/consumers/{group}/instances/{names[1]}/subscription")
        assert dead.status_code == 404, dead.text
        live = fresh(creds).get(f"{base}/consumers/{group}/instances/{names[0]}/subscription")
        assert live.status_code == 200, live.text
    again = create(base, creds, group, names[1])  # the restarted worker makes it anew
    assert again.status_code == 200, again.text


def test_sigterm_stops_every_worker_with_exit_0(tmp_path: Path) -> None:
    with http_gateway_stack(tmp_path, {"workers": str(WORKERS)}) as running:
        wait_until(
            lambda: ready_lines(running, "pier gateway ready") == 1,
            what="the supervisor's ready line",
            timeout=60,
        )
        assert running.gateway is not None
        pids = worker_pids(running.gateway.pid)
        assert len(pids) == WORKERS
        assert running.gateway.stop() == 0
        for pid in pids.values():
            wait_until(partial(gone, pid), what=f"worker {pid} gone", timeout=10)


def test_workers_die_with_a_killed_supervisor(tmp_path: Path) -> None:
    with http_gateway_stack(tmp_path, {"workers": str(WORKERS)}) as running:
        wait_until(
            lambda: ready_lines(running, "pier gateway ready") == 1,
            what="the supervisor's ready line",
            timeout=60,
        )
        assert running.gateway is not None
        pids = worker_pids(running.gateway.pid)
        assert len(pids) == WORKERS
        running.gateway.kill()
        for pid in pids.values():
            wait_until(partial(gone, pid), what=f"worker {pid} gone", timeout=30)


def gone(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_operator_lists_and_deletes_every_workers_instances(
    stack: GatewayStack, topic_name: str
) -> None:
    with stack.store() as store:
        token = str(store.create_operator(f"ops-{topic_name[-8:]}", actor=OPERATOR))
    base = http_url(stack)
    creds = (stack.credentials["acme"].key_id, stack.credentials["acme"].secret)
    group = f"{topic_name}-g"
    names = names_per_worker(group)
    for name in names.values():
        assert create(base, creds, group, name).status_code == 200
    operator = fresh(("", ""))
    operator.auth = None
    operator.headers["Authorization"] = f"Bearer {token}"
    listing = f"{base}/operator/v1/tenants/acme/http-consumers"
    for _ in range(6):  # whichever worker answers lists both workers' instances
        listed = operator.get(listing, timeout=30)
        assert listed.status_code == 200, listed.text
        mine = {i["instance_id"] for i in listed.json()["items"] if i["group"] == group}
        assert mine == set(names.values())
    for name in names.values():
        assert operator.delete(f"{listing}/{group}/{name}", timeout=30).status_code == 204
    for name in names.values():
        gone = fresh(creds).get(f"{base}/consumers/{group}/instances/{name}/subscription")
        assert gone.status_code == 404, gone.text
