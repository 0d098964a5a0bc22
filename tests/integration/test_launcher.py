"""The launcher in `infra.stack`: free ports, ZooKeeper, and the broker lifecycle.

Broker lifecycle tests run a stand-in broker that speaks the same command-line contract as
`pier broker` (ready line, ApiVersions answers, clean-shutdown marker on SIGTERM), so the launcher is
proven independently of the real broker; `test_cli.py` covers the real one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from infra.errors import LaunchError
from infra.gateway import start_gateway
from infra.probes import PORT_RANGE_ENV, listen_ports
from infra.process import pid_running
from infra.stack import (
    NotReadyError,
    ProcessExitedError,
    Stack,
    ZooKeeperProcess,
    free_port,
    kafka_ready,
    start_broker,
    start_zookeeper,
    zookeeper_ready,
)
from tests.polling import wait_until

pytestmark = pytest.mark.integration

# A Kafka listener's core for the stand-ins: every request gets an ApiVersions v0 answer with no
# error and no APIs (what the launcher's probe reads); `answered` is set after the first.
KAFKA_ANSWERS = textwrap.dedent(
    """
    import argparse, asyncio, signal, struct

    answered = asyncio.Event()

    def arguments(*flags):
        parser = argparse.ArgumentParser()
        parser.add_argument("command")
        for flag in flags:
            parser.add_argument(flag)
        return parser.parse_args()

    async def answer(reader, writer):
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = await reader.readexactly(size)
                body = request[4:8] + struct.pack(">hi", 0, 0)  # correlation id, no error, no APIs
                writer.write(struct.pack(">i", len(body)) + body)
                await writer.drain()
                answered.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def stop_on_signals():
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        return stop
    """
)

STAND_IN_BROKER = KAFKA_ANSWERS + textwrap.dedent(
    """
    import sys
    from pathlib import Path

    args = arguments("--data-dir", "--host", "--config", "--node-id", "--port", "--metrics-port")
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)

    async def main():
        stop = stop_on_signals()
        server = await asyncio.start_server(answer, args.host, int(args.port))
        print(f"pier broker ready node_id={args.node_id} listener={args.host}:{args.port}",
              file=sys.stderr, flush=True)
        await stop.wait()
        server.close()
        (data_dir / ".kafka_cleanshutdown").touch()

    asyncio.run(main())
    """
)


@pytest.fixture
def stand_in(tmp_path: Path) -> tuple[str, ...]:
    script = tmp_path / "stand_in_broker.py"
    script.write_text(STAND_IN_BROKER)
    return (sys.executable, str(script))


# A gateway whose HTTP API opens after its Kafka port already answers, as the real one's does (its
# HTTP start waits on ZooKeeper for the consumer-instance directory): the HTTP port is opened half a
# second after the first ApiVersions probe is answered.
STAND_IN_GATEWAY = KAFKA_ANSWERS + textwrap.dedent(
    """
    args = arguments("--bootstrap", "--db", "--host", "--port", "--broker-port-base", "--config")
    http_port = next(
        int(line.split("=", 1)[1]) for line in open(args.config) if line.startswith("http.port=")
    )

    async def accept(reader, writer):
        writer.close()

    async def main():
        stop = stop_on_signals()
        await asyncio.start_server(answer, args.host, int(args.port))
        await answered.wait()
        await asyncio.sleep(0.5)
        await asyncio.start_server(accept, args.host, http_port)
        await stop.wait()

    asyncio.run(main())
    """
)


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == len(ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_free_ports_come_from_the_configured_range(monkeypatch: pytest.MonkeyPatch) -> None:
    """What keeps parallel pytest workers apart: each has its own PIER_PORT_RANGE slice."""
    low, _ = listen_ports()
    monkeypatch.setenv(PORT_RANGE_ENV, f"{low}-{low + 63}")
    ports = {free_port() for _ in range(16)}
    assert all(low <= port <= low + 63 for port in ports), sorted(ports)
    monkeypatch.setenv(PORT_RANGE_ENV, "not-a-range")
    with pytest.raises(LaunchError, match="PIER_PORT_RANGE"):
        free_port()


def test_zookeeper_serves_and_stops_leaving_no_process(tmp_path: Path) -> None:
    server = start_zookeeper(tmp_path / "zk")
    pid = server.process.pid
    try:
        assert zookeeper_ready(server.host, server.port)
        client = KazooClient(hosts=server.connect, timeout=10)
        client.start(timeout=10)
        try:
            client.create("/pier/launcher", b"hello", makepath=True)
            assert client.get("/pier/launcher")[0] == b"hello"
        finally:
            client.stop()
            client.close()
    finally:
        server.stop()
    assert server.process.returncode is not None
    assert not pid_running(pid)
    assert not zookeeper_ready(server.host, server.port)
    assert (tmp_path / "zk" / "zoo.cfg").read_text().count("admin.enableServer=false") == 1


def test_zookeeper_kill_leaves_no_process(tmp_path: Path) -> None:
    server = start_zookeeper(tmp_path / "zk")
    server.kill()
    assert server.process.returncode == -9
    assert not pid_running(server.process.pid)


def test_session_zookeeper_fixture_answers(zookeeper: ZooKeeperProcess) -> None:
    assert zookeeper_ready(zookeeper.host, zookeeper.port)
    assert zookeeper.process.poll() is None


def test_broker_lifecycle_start_restart_stop(tmp_path: Path, stand_in: tuple[str, ...]) -> None:
    data_dir = tmp_path / "node" / "data"
    broker = start_broker(
        data_dir, node_id=3, config={"num.partitions": "2"}, zookeeper="zk:2181", program=stand_in
    )
    first_pid = broker.pid
    assert broker.bootstrap == f"127.0.0.1:{broker.port}"
    assert kafka_ready(broker.host, broker.port)
    properties = (tmp_path / "node" / "broker-3.properties").read_text().splitlines()
    assert "num.partitions=2" in properties
    assert "zookeeper.connect=zk\\:2181" not in properties  # values keep ':' unescaped
    assert "zookeeper.connect=zk:2181" in properties

    broker.restart()
    assert broker.pid != first_pid
    assert not pid_running(first_pid)
    assert kafka_ready(broker.host, broker.port)

    assert broker.stop() == 0
    assert (data_dir / ".kafka_cleanshutdown").exists()
    assert not pid_running(broker.pid)
    assert "pier broker ready node_id=3" in broker.log_path.read_text()


def test_broker_kill_is_unclean(tmp_path: Path, stand_in: tuple[str, ...]) -> None:
    broker = start_broker(tmp_path / "data", program=stand_in)
    broker.kill()
    assert broker.process.returncode == -9
    assert not pid_running(broker.pid)
    assert not (tmp_path / "data" / ".kafka_cleanshutdown").exists()


def test_broker_that_exits_early_raises_with_its_log(tmp_path: Path) -> None:
    program = (sys.executable, "-c", "import sys; sys.exit('boom: cannot open data dir')")
    with pytest.raises(ProcessExitedError, match="boom: cannot open data dir"):
        start_broker(tmp_path / "data", program=program)


def test_broker_that_never_listens_is_killed_after_the_deadline(tmp_path: Path) -> None:
    program = (sys.executable, "-c", "import time; print('stuck', flush=True); time.sleep(600)")
    with pytest.raises(NotReadyError, match="stuck"):
        start_broker(tmp_path / "data", program=program, wait=1.0)
    assert not [cmd for cmd in live_children() if "time.sleep(600)" in cmd]


def test_probe_rejects_a_server_that_is_not_kafka() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def answer_garbage() -> None:
            connection, _ = listener.accept()
            with connection:
                connection.recv(64)
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        thread = threading.Thread(target=answer_garbage)
        thread.start()
        assert not kafka_ready("127.0.0.1", port)
        thread.join()
    assert not kafka_ready("127.0.0.1", free_port())


def test_stack_stops_everything_even_on_error(tmp_path: Path, stand_in: tuple[str, ...]) -> None:
    pids: list[int] = []
    with (
        pytest.raises(RuntimeError, match="test body failed"),
        Stack(tmp_path, zookeeper=True, brokers=2, broker_program=stand_in) as stack,
    ):
        assert stack.zookeeper is not None
        pids = [stack.zookeeper.process.pid, *(broker.pid for broker in stack.brokers)]
        assert [broker.node_id for broker in stack.brokers] == [0, 1]
        assert stack.bootstrap.count(",") == 1
        properties = (tmp_path / "broker-1" / "broker-1.properties").read_text()
        assert f"zookeeper.connect={stack.zookeeper.connect}" in properties
        raise RuntimeError("test body failed")
    assert len(pids) == 3
    assert not any(pid_running(pid) for pid in pids)
    assert (tmp_path / "broker-0" / "data" / ".kafka_cleanshutdown").exists()


def test_stack_that_fails_to_start_leaves_nothing(tmp_path: Path) -> None:
    failing = (sys.executable, "-c", "raise SystemExit(2)")
    stack = Stack(tmp_path, zookeeper=True, brokers=1, broker_program=failing)
    with pytest.raises(ProcessExitedError, match="exited with status 2"), stack:
        pytest.fail("a stack whose broker cannot start must not enter its block")
    assert stack.zookeeper is None
    assert stack.brokers == []
    assert not [cmd for cmd in live_children() if str(tmp_path) in cmd]


def live_children() -> list[str]:
    """Command lines of this test process's live (non-zombie) children."""
    return list(children_of(os.getpid()).values())


def children_of(pid: int) -> dict[int, str]:
    """PID → command line of the live (non-zombie) children of `pid`."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, parent = stat.read_text().rsplit(")", 1)[-1].split()[:2]
            if parent == str(pid) and state != "Z":
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found[int(stat.parent.name)] = cmdline
        except OSError:
            continue
    return found


def wait_for_output(
    output: Path, process: subprocess.Popen[bytes], text: str, *, timeout: float
) -> str:
    """Until `process` (a launcher writing to `output`) has printed `text`; all it printed.
    Fails at once if it exits first; either failure shows what it printed."""

    def printed() -> str | None:
        so_far = output.read_text()
        if text in so_far:
            return so_far
        if process.poll() is not None:
            raise AssertionError(f"exited with status {process.returncode} first")
        return None

    try:
        found = wait_until(printed, what=f"{text!r} printed", timeout=timeout)
    except AssertionError as error:
        raise AssertionError(f"{error}; it printed:\n{output.read_text()}") from error
    assert found is not None
    return found


def test_up_prints_client_snippets_and_stops_everything_on_ctrl_c(
    tmp_path: Path, stand_in: tuple[str, ...]
) -> None:
    port, admin_port = free_port(), free_port()
    argv = ["--standalone", "--port", str(port), "--admin-port", str(admin_port)]
    argv += ["--root", str(tmp_path / "state"), "--no-gateway"]  # a stand-in broker: no gateway
    driver = textwrap.dedent(
        f"""
        import functools
        import infra.up_main as up
        up.Stack = functools.partial(up.Stack, broker_program={stand_in!r})
        raise SystemExit(up.main({argv!r}))
        """
    )
    output = tmp_path / "up.out"
    with output.open("wb") as sink:
        up = subprocess.Popen([sys.executable, "-c", driver], stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_for_output(output, up, "Press Ctrl-C", timeout=30)
        children = children_of(up.pid)
        assert sorted(
            "broker" if "stand_in_broker" in cmd else "admin-api" if "admin-api" in cmd else cmd
            for cmd in children.values()
        ) == ["admin-api", "broker"]
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=30) == 0
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    text = output.read_text()
    for client in ("confluent-kafka", "kafka-python", "aiokafka", "kcat"):
        assert f"--- {client} ---" in text
    assert f'"bootstrap.servers": "127.0.0.1:{port}"' in text
    assert f"kcat -b 127.0.0.1:{port} -L" in text
    assert (tmp_path / "state" / "data" / ".kafka_cleanshutdown").is_file()
    assert not any(pid_running(pid) for pid in children)


def test_children_die_when_the_launcher_is_killed(
    tmp_path: Path, stand_in: tuple[str, ...]
) -> None:
    driver = textwrap.dedent(
        f"""
        import pathlib, time
        from infra.stack import start_broker
        broker = start_broker(pathlib.Path({str(tmp_path / "data")!r}), program={stand_in!r})
        print(broker.pid, flush=True)
        time.sleep(600)
        """
    )
    launcher = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True)
    assert launcher.stdout is not None
    broker_pid = int(launcher.stdout.readline())
    assert pid_running(broker_pid)
    launcher.kill()
    launcher.wait()
    launcher.stdout.close()
    wait_until(
        lambda: not pid_running(broker_pid),
        what="the broker gone after its launcher was SIGKILLed",
        timeout=10,
        interval=0.02,
    )


def test_a_started_gateway_has_its_http_port_open_too(tmp_path: Path) -> None:
    """start_gateway returns only when every listener accepts. CI once met a refused HTTP port
    right after `infra/up` said it was up: the Kafka port alone was probed."""
    script = tmp_path / "stand_in_gateway.py"
    script.write_text(STAND_IN_GATEWAY)
    http_port = free_port()
    gateway = start_gateway(
        tmp_path / "gateway",
        "127.0.0.1:9",
        "sqlite://",
        node_ids=[0],
        properties={"http.port": str(http_port)},
        program=(sys.executable, str(script)),
    )
    try:
        assert gateway.http_port == http_port
        with socket.create_connection(("127.0.0.1", http_port), timeout=5):
            pass  # refused before the fix: start_gateway returned before the HTTP port opened
    finally:
        assert gateway.stop() == 0
