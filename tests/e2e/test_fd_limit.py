"""A real broker started with a low open-file limit (`prlimit --nofile`), driven by real clients.

Issue 13 finding 5: at the limit, CreateTopics answered UNKNOWN_SERVER_ERROR after persisting 64 of
100 partitions, and the listener spun at 100 % CPU logging hundreds of MB while accepting nothing.
Now a CreateTopics the limit cannot hold is refused whole with POLICY_VIOLATION naming the limit
(standalone and ZooKeeper mode: nothing on disk, nothing in ZooKeeper); an accept that fails with
EMFILE backs off and logs once per interval (CPU measured from /proc/<pid>/stat while clients
hammer the port); and once topics are deleted the broker serves new clients again.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kio.schema.delete_topics.v4.request import DeleteTopicsRequest
from kio.schema.delete_topics.v4.response import DeleteTopicsResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32Timedelta

from infra.broker import PIER_PROGRAM
from infra.stack import BrokerProcess, start_broker
from tests.conftest import remember_log
from tests.e2e.raw_wire import RawConnection
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
NOFILE = 256
CPU_BOUND = 0.20
WARM_UP_S = 12.0
WINDOW_S = 4.0
# Deleted logs give their descriptors back at the next delayed-delete pass (every second).
CONFIG = {"log.segment.delete.delay.ms": "0"}
# Connections held open while creating what the refusal allowed: on the old budget, which counted
# sockets against partitions, these 12 made it 3 partitions short (sockets draw on the reserve now).
HELD_CONNECTIONS = 12
LIMIT_MESSAGE = re.compile(r"open-file limit \((\d+)\) allows (\d+) more partitions")


def start_limited(tmp_path: Path, request: pytest.FixtureRequest, **kw: str) -> BrokerProcess:
    data_dir = tmp_path / "broker" / "data"
    remember_log(request.node, "broker", data_dir.parent / "broker-0.log")
    program = ("prlimit", f"--nofile={NOFILE}:{NOFILE}", *PIER_PROGRAM)
    zookeeper = kw.pop("zookeeper", None)
    return start_broker(data_dir, config=CONFIG, program=program, zookeeper=zookeeper)


def soft_open_files(pid: int) -> int:
    """The soft `Max open files` of a process (/proc/<pid>/limits)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError(f"no open-file limit for {pid}")


def test_the_broker_raises_its_soft_open_file_limit_to_the_hard_one(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """As the JVM raises Kafka's: a soft 256 under a hard 2048 would allow ~50 partitions."""
    data_dir = tmp_path / "broker" / "data"
    remember_log(request.node, "broker", data_dir.parent / "broker-0.log")
    program = ("prlimit", f"--nofile={NOFILE}:{8 * NOFILE}", *PIER_PROGRAM)
    broker = start_broker(data_dir, config=CONFIG, program=program)
    try:
        assert soft_open_files(broker.pid) == 8 * NOFILE
        limit, allowed = refusal(broker.bootstrap, "probe", 10 * NOFILE)
    finally:
        broker.stop()
    assert (limit, allowed > NOFILE) == (8 * NOFILE, True)  # the budget reads the raised limit
    assert (
        "event=open_file_limit_raised soft_was=256 soft=2048"
        in (data_dir.parent / "broker-0.log").read_text()
    )


@pytest.fixture
def limited_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    broker = start_limited(tmp_path, request)
    try:
        yield broker
    finally:
        broker.stop()


def create_topic_error(bootstrap: str, name: str, partitions: int) -> KafkaError | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
    try:
        futures[name].result(timeout=30)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        return error
    return None


def refusal(bootstrap: str, name: str, partitions: int) -> tuple[int, int]:
    """(limit, partitions still allowed) from the POLICY_VIOLATION a too-large topic gets."""
    error = create_topic_error(bootstrap, name, partitions)
    assert error is not None, f"a {partitions}-partition topic was created at limit {NOFILE}"
    assert error.code() == KafkaError.POLICY_VIOLATION, error
    found = LIMIT_MESSAGE.search(error.str())
    assert found, f"the refusal does not name the limit: {error.str()}"
    return int(found[1]), int(found[2])


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def log_lines(broker: BrokerProcess, needle: str) -> int:
    return broker.log_path.read_text(errors="replace").count(needle)


class Hammer:
    """Threads that connect and disconnect as fast as they can, counting attempts."""

    def __init__(self, broker: BrokerProcess, threads: int = 4) -> None:
        self._address = (broker.host, broker.port)
        self._stop = threading.Event()
        self.attempts = 0
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def __enter__(self) -> Hammer:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.attempts += 1
            with contextlib.suppress(OSError):  # refused or timed out: the backlog is full
                socket.create_connection(self._address, timeout=0.2).close()


def fill_descriptors(broker: BrokerProcess) -> list[socket.socket]:
    """Open connections until the broker has none left to accept them (its fd table is full)."""
    held: list[socket.socket] = []
    while open_fds(broker.pid) < NOFILE and len(held) < 2 * NOFILE:
        held.append(socket.create_connection((broker.host, broker.port), timeout=5))
        if len(held) % 20 == 0:
            time.sleep(0.05)  # let the broker accept what is queued before counting again
    for _ in range(20):  # and some more, left waiting in the listen backlog
        held.append(socket.create_connection((broker.host, broker.port), timeout=5))
    return held


@contextlib.contextmanager
def held_connections(broker: BrokerProcess, count: int) -> Iterator[None]:
    """`count` connections the broker has accepted and serves, open for the block."""
    with contextlib.ExitStack() as stack:
        for _ in range(count):
            connection = stack.enter_context(RawConnection(broker.host, broker.port, timeout=10))
            connection.api_versions()  # accepted and served, so the broker holds its socket
        yield


def delete_topic(connection: RawConnection, name: str) -> int:
    """DeleteTopics v4 on a raw connection; the topic's error code."""
    request = DeleteTopicsRequest(
        topic_names=(TopicName(name),), timeout=i32Timedelta.parse(datetime.timedelta(seconds=30))
    )
    response = connection.call(request, DeleteTopicsResponse, timeout=30)
    (result,) = response.responses
    return int(result.error_code)


def served(broker: BrokerProcess) -> bool:
    with RawConnection(broker.host, broker.port, timeout=2) as fresh:
        fresh.api_versions()
    return True


def test_create_topics_over_the_limit_is_refused_whole(limited_broker: BrokerProcess) -> None:
    broker = limited_broker
    limit, allowed = refusal(broker.bootstrap, "too-many", NOFILE)
    assert limit == NOFILE and 0 < allowed < NOFILE, (limit, allowed)
    data = broker.data_dir
    leftovers = sorted(p.name for p in data.iterdir() if p.name.startswith("too-many-"))
    assert leftovers == [], f"a refused topic left logs behind: {leftovers}"
    registry = json.loads((data / "pier-topics.json").read_text())["topics"]
    assert "too-many" not in registry
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert "too-many" not in metadata.topics
    # What the refusal said still fits does fit, whole, however many clients are connected (their
    # sockets draw on the reserve, not on the partitions' share); a restart finds exactly that.
    with held_connections(broker, HELD_CONNECTIONS):
        assert create_topic_error(broker.bootstrap, "fits", allowed) is None
    broker.restart()
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert len(metadata.topics["fits"].partitions) == allowed
    assert "too-many" not in metadata.topics


def test_at_emfile_the_listener_backs_off_and_serves_again_after_topics_are_deleted(
    limited_broker: BrokerProcess,
) -> None:
    broker = limited_broker
    _, allowed = refusal(broker.bootstrap, "probe", 10 * NOFILE)
    assert create_topic_error(broker.bootstrap, "filler", allowed) is None
    # A topic this wide opens its logs after the answer, in slices (local_topics): let them all
    # open before the table is filled, or the last ones meet EMFILE (and stay offline).
    wait_until(
        lambda: len(list(broker.data_dir.glob("filler-*"))) == allowed,
        what=f"the {allowed} logs of 'filler' opened",
        timeout=30,
    )
    with RawConnection(broker.host, broker.port, timeout=30) as admin:  # opened while fds last
        # A full fd table also fails imports: DeleteTopics' schemas must be loaded beforehand.
        assert delete_topic(admin, "absent") == 3  # UNKNOWN_TOPIC_OR_PARTITION
        held = fill_descriptors(broker)
        try:
            wait_until(
                lambda: log_lines(broker, "event=accept_failed errno=EMFILE") > 0,
                what="an accept failing with EMFILE",
                timeout=20,
            )
            log_before = broker.log_path.stat().st_size
            with Hammer(broker) as hammer:
                # asyncio's own accept loop multiplied its retries: its CPU grew by ~10 points
                # every 5 s (7 % in the first seconds, 55 % after 25 s), so measure late.
                time.sleep(WARM_UP_S)
                cpu_before, started = cpu_seconds(broker.pid), time.monotonic()
                time.sleep(WINDOW_S)
                cpu = (cpu_seconds(broker.pid) - cpu_before) / (time.monotonic() - started)
                attempts = hammer.attempts
            logged = broker.log_path.stat().st_size - log_before
            seconds = WARM_UP_S + WINDOW_S
            assert cpu < CPU_BOUND, (
                f"broker CPU {cpu:.1%} over {WINDOW_S:g} s after {WARM_UP_S:g} s at EMFILE, "
                f"{attempts} connect attempts (bound {CPU_BOUND:.0%})"
            )
            assert logged < 4096, f"{logged} bytes of log in {seconds:g} s at EMFILE"
            assert open_fds(broker.pid) >= NOFILE - 1, "the fd table was not full after all"
            assert delete_topic(admin, "filler") == 0
            wait_until(
                lambda: served(broker),
                what="a new client served after the topic was deleted",
                timeout=30,
                retry_on=(OSError, ConnectionError),
            )
        finally:
            for sock in held:
                sock.close()
    print(f"figure: broker CPU {cpu:.1%} at EMFILE, {attempts} connect attempts, {logged} B log")


def test_zookeeper_mode_refuses_before_writing_anything(
    tmp_path: Path, request: pytest.FixtureRequest, chroot: str
) -> None:
    from kazoo.client import KazooClient

    broker = start_limited(tmp_path, request, zookeeper=chroot)
    try:
        limit, allowed = refusal(broker.bootstrap, "too-many", NOFILE)
        assert limit == NOFILE and 0 < allowed < NOFILE, (limit, allowed)
        zk = KazooClient(hosts=chroot)
        zk.start(10)
        try:
            for path in ("/brokers/topics/too-many", "/config/topics/too-many"):
                assert zk.exists(path) is None, f"{path} written for a refused topic"
        finally:
            zk.stop()
            zk.close()
        assert create_topic_error(broker.bootstrap, "fits", allowed) is None
    finally:
        broker.stop()
