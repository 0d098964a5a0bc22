"""`infra/up`'s watch over its running stack: report deaths, restart dead brokers on request.

Owns the launcher's loop once the stack is up. Every `interval` it polls each process:
- a broker that died is reported once (`broker 3 (pid N) died: exit -9; the rest keep running;
  run infra/up again to restart it`) and everything else keeps running, so the cluster fails
  over as it would in production and a developer can watch it happen;
- the billing stream dying is reported and it is started again after a backoff
  (`infra.billing_loop`: 2 s doubling to 60 s): usage waits in `__usage`, nothing is lost;
- any other process dying (ZooKeeper, the admin API, the gateway) ends
  `infra/up` with status 1, which stops the whole stack, as before: the stack is not usable
  without it.
A second `infra/up` on the same state dir (`ask_running_launcher`) starts nothing of its own: when
the record shows a process that died it sends a restart request; otherwise it says that Pier is
already running (or still starting) there, with the launcher's PID, the processes and the URLs,
and exits with `ALREADY_RUNNING` (3). A restart request (SIGUSR1, see `infra.up_state`) restarts
every dead broker with its node id, port, data dir and config and waits until it answers; a broker whose
previous session still holds its ZooKeeper registration waits inside for it to expire (see
`brokers.controller.registration`). Each change is written to the stack's record.
Blocking; main thread only: children spawned here must be the main thread's, so that their
parent-death signal fires when the launcher itself dies.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from infra import up_state
from infra.errors import LaunchError
from infra.process import pid_running
from infra.stack import BrokerProcess, Stack
from infra.up_state import ProcessEntry, RestartOutcome

HEALTH_CHECK_INTERVAL = 1.0
ALREADY_RUNNING = 3  # the exit status of a second `infra/up` that found nothing to do


class Watcher:
    def __init__(
        self,
        stack: Stack,
        root: Path,
        endpoints: list[tuple[str, str]],
        interval: float = HEALTH_CHECK_INTERVAL,
    ) -> None:
        self._stack = stack
        self._root = root
        self._endpoints = endpoints
        self._interval = interval
        self._reported: set[int] = set()  # PIDs of dead brokers already reported
        self._restarts = 0
        self._last = RestartOutcome()

    def run(self, stop: threading.Event, restart_wanted: threading.Event) -> int:
        """Until `stop`: 0; 1 when a process the stack cannot do without died."""
        self.save()
        while not stop.wait(self._interval):
            if self._essential_died():
                return 1
            if self._report_dead_brokers() | self._restart_billing():
                self.save()
            if restart_wanted.is_set():
                restart_wanted.clear()
                self._serve_restart()
        return 0

    def save(self) -> None:
        up_state.save(self._root, self.entries(), self._restarts, self._last, self._endpoints)

    def entries(self) -> list[ProcessEntry]:
        """Every process of the stack, in start order, as the record lists it."""
        stack = self._stack
        found: list[ProcessEntry] = []
        if stack.zookeeper is not None:
            zookeeper = stack.zookeeper
            found.append(
                _entry("ZooKeeper", zookeeper.process, zookeeper.connect, zookeeper.log_path)
            )
        for broker in stack.brokers:
            found.append(
                _entry(
                    f"broker {broker.node_id}", broker.process, broker.bootstrap, broker.log_path
                )
            )
        if stack.admin_api is not None:
            api = stack.admin_api
            found.append(_entry("admin API", api.process, api.url, api.log_path))
        if stack.gateway is not None:
            gateway = stack.gateway
            found.append(_entry("gateway", gateway.process, gateway.bootstrap, gateway.log_path))
        if stack.billing is not None:
            found.append(
                _entry("billing stream", stack.billing.process, "", stack.billing.log_path)
            )
        return found

    def _restart_billing(self) -> bool:
        """Report a dead billing stream, restart it when its backoff is over; True on news."""
        if self._stack.billing is None:
            return False
        line = self._stack.billing.restart_if_due()
        if line is not None:
            print(f"infra/up: {line}", file=sys.stderr, flush=True)
        return line is not None

    def _essential_died(self) -> bool:
        for name, process, log_path in self._essentials():
            if process.poll() is not None:
                print(
                    f"infra/up: {name} exited with {process.returncode}; see {log_path}",
                    file=sys.stderr,
                    flush=True,
                )
                return True
        return False

    def _essentials(self) -> list[tuple[str, subprocess.Popen[bytes], Path]]:
        stack = self._stack
        found: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        if stack.admin_api is not None:
            found.append(("admin API", stack.admin_api.process, stack.admin_api.log_path))
        if stack.gateway is not None:
            found.append(("gateway", stack.gateway.process, stack.gateway.log_path))
        if stack.zookeeper is not None:
            found.append(("ZooKeeper", stack.zookeeper.process, stack.zookeeper.log_path))
        return found

    def _dead_brokers(self) -> list[BrokerProcess]:
        return [broker for broker in self._stack.brokers if broker.process.poll() is not None]

    def _report_dead_brokers(self) -> bool:
        """Say once which brokers died; True when one was new."""
        news = [b for b in self._dead_brokers() if b.pid not in self._reported]
        for broker in news:
            self._reported.add(broker.pid)
            print(
                f"infra/up: broker {broker.node_id} (pid {broker.pid}) died:"
                f" exit {broker.process.returncode}; the rest keep running;"
                f" run infra/up again to restart it (log {broker.log_path})",
                file=sys.stderr,
                flush=True,
            )
        return bool(news)

    def _serve_restart(self) -> None:
        """Restart every dead broker, then record what happened (the requester waits for it)."""
        self._report_dead_brokers()
        outcome = RestartOutcome()
        for broker in self._dead_brokers():
            try:
                broker.restart()
            except LaunchError as exc:  # the new process is gone again; say why here
                line = f"broker {broker.node_id} did not restart: {str(exc).splitlines()[0]}"
                outcome.failed.append(line)
                self._reported.add(broker.pid)
            else:
                line = f"broker {broker.node_id} restarted (pid {broker.pid}) on {broker.bootstrap}"
                outcome.restarted.append(line)
            print(f"infra/up: {line} (log {broker.log_path})", file=sys.stderr, flush=True)
        self._restarts += 1
        self._last = outcome
        self.save()


def _entry(name: str, process: subprocess.Popen[bytes], address: str, log: Path) -> ProcessEntry:
    return ProcessEntry(name, process.pid, address, str(log), process.poll() is None)


def ask_running_launcher(root: Path, launcher: up_state.LauncherRecord) -> int:
    """A second `infra/up` on a running stack's state dir: restart what died and say what was
    done (0; 1 if a restart failed), or say what runs there and start nothing (ALREADY_RUNNING)."""
    if launcher.starting:
        print(
            f"infra/up: Pier is already starting from {root} (launcher pid {launcher.pid});"
            " nothing started. Wait for its 'Pier is up', or stop it (Ctrl-C in its terminal,"
            f" or kill {launcher.pid})",
            file=sys.stderr,
            flush=True,
        )
        return ALREADY_RUNNING
    if not launcher.dead():
        print(
            f"infra/up: Pier is already running from {root} (launcher pid {launcher.pid});"
            " nothing started",
            flush=True,
        )
        _describe(launcher)
        print(
            f"Stop it with Ctrl-C in its terminal (or kill {launcher.pid}); run infra/up again"
            " after a broker dies to restart it.",
            flush=True,
        )
        return ALREADY_RUNNING
    return _restart_dead(root, launcher)


def _restart_dead(root: Path, launcher: up_state.LauncherRecord) -> int:
    names = ", ".join(entry.name for entry in launcher.dead())
    print(
        f"infra/up: Pier is running from {root} (launcher pid {launcher.pid}) without {names};"
        " asking it to restart what died",
        flush=True,
    )
    answered = up_state.request_restart(root, launcher)
    if answered is None:
        print("infra/up: the running launcher did not answer; see its output", file=sys.stderr)
        return 1
    outcome = answered.last_restart
    for line in outcome.restarted + outcome.failed:
        print(f"infra/up: {line}", flush=True)
    if not outcome.restarted and not outcome.failed:
        print("infra/up: nothing was missing", flush=True)
    _describe(answered)
    return 1 if outcome.failed else 0


def _describe(launcher: up_state.LauncherRecord) -> None:
    """The recorded processes (PID, address, whether they run), then the stack's URLs."""
    for entry in launcher.processes:
        state = "running" if entry.running and pid_running(entry.pid) else "NOT running"
        where = f" {entry.address}" if entry.address else ""
        print(f"  {entry.name}: pid {entry.pid}{where} {state}", flush=True)
    if launcher.endpoints:
        print("Its addresses:", flush=True)
    for name, url in launcher.endpoints:
        print(f"  {name}: {url}", flush=True)
