"""One copier (tests/e2e/transactions/copier.py) as a child process the test kills and restarts.

Owns: the copier's command line, its incarnations (each start is one; SIGKILL ends one), and the
status it wrote, read back from its status file (`events`, `progress_percent` of the running
incarnation as ducktape's `TransactionalMessageCopier.progress_percent` computes it: records
committed since this start over those plus the remaining ones). What the copier reported
committed, aborted or only produced (a kill can land anywhere: whether such a transaction
committed is decided by the readers, not here) is kept per transaction tag. Children go through
`infra.process.spawn`, so they die with the test process. Blocking; one object belongs to the
thread that started it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra import process as proc
from tests.polling import wait_until

# Run by path: the script imports nothing of this repository, so any working directory will do.
COPIER = Path(__file__).resolve().with_name("copier.py")
SUCCESS = 0


@dataclass(frozen=True)
class CopierSpec:
    """What every incarnation of one copier is started with."""

    bootstrap: str
    transactional_id: str
    group: str
    input_topic: str
    input_partition: int
    output_topic: str
    transaction_size: int = 750
    transaction_timeout_ms: int = 40_000
    abort_every: int = 0
    settings: Mapping[str, Any] = field(default_factory=dict)


class CopierProcess:
    def __init__(self, spec: CopierSpec, root: Path) -> None:
        self.spec = spec
        self.root = root
        self.status_path = root / "status.jsonl"
        self.log_path = root / "copier.log"
        self.incarnation = -1
        self.process: subprocess.Popen[bytes] | None = None
        self.events: list[dict[str, Any]] = []
        self._read_bytes = 0
        root.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        self.incarnation += 1
        self.process = proc.spawn(self.argv(), self.log_path)

    def argv(self) -> list[str]:
        spec = self.spec
        return [
            sys.executable, str(COPIER),
            "--bootstrap", spec.bootstrap,
            "--transactional-id", spec.transactional_id,
            "--group", spec.group,
            "--input-topic", spec.input_topic,
            "--input-partition", str(spec.input_partition),
            "--output-topic", spec.output_topic,
            "--incarnation", str(self.incarnation),
            "--transaction-size", str(spec.transaction_size),
            "--transaction-timeout-ms", str(spec.transaction_timeout_ms),
            "--abort-every", str(spec.abort_every),
            "--settings", json.dumps(dict(spec.settings)),
            "--status", str(self.status_path),
        ]  # fmt: skip

    def kill(self) -> None:
        """SIGKILL (a crash: no flush, no abort, an open transaction left to the coordinator)."""
        assert self.process is not None
        proc.kill(self.process)
        self.poll()

    def stop(self) -> None:
        if self.process is not None:
            proc.kill(self.process)

    def poll(self) -> list[dict[str, Any]]:
        """Read the status lines written since the last call; return all events so far."""
        if not self.status_path.exists():  # the copier has not started writing yet
            return self.events
        with self.status_path.open("rb") as status:
            status.seek(self._read_bytes)
            data = status.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line being written waits for next time
        self._read_bytes += len(complete)
        self.events += [json.loads(line) for line in complete.splitlines()]
        return self.events

    def exit_status(self) -> int | None:
        assert self.process is not None
        return self.process.poll()

    def current(self) -> list[dict[str, Any]]:
        """The events of the running incarnation (from its `start` line on)."""
        self.poll()
        starts = [i for i, e in enumerate(self.events) if e["event"] == "start"]
        if not starts or self.events[starts[-1]]["incarnation"] != self.incarnation:
            return []
        return self.events[starts[-1] :]

    def progress_percent(self) -> float:
        events = self.current()
        if not events:
            return 0.0
        remaining_at_start = events[0]["remaining"]
        consumed = sum(e["count"] for e in events if e["event"] == "committed")
        return 100.0 if remaining_at_start == 0 else 100.0 * consumed / remaining_at_start

    def failed(self) -> str | None:
        """Why the copier ended other than by finishing, if it did."""
        status = self.exit_status()
        if status is None or status == SUCCESS:
            return None
        fatal = [e for e in self.events if e["event"] == "fatal"]
        return f"copier {self.spec.transactional_id} exited {status}: {fatal or proc.log_tail(self.log_path)}"

    def wait_progress(self, percent: float, timeout: float) -> None:
        def reached() -> bool:
            if (why := self.failed()) is not None:
                raise AssertionError(why)
            return self.progress_percent() >= percent

        wait_until(
            reached,
            what=f"copier {self.spec.transactional_id} at {percent:g} % (incarnation {self.incarnation})",
            timeout=timeout,
            interval=0.02,
        )

    def wait_in_transaction(self, timeout: float) -> None:
        """Until the copier has flushed a transaction's records and not yet committed it: a kill
        now leaves an open transaction with data in the log for the coordinator to abort."""

        def open_now() -> bool:
            if (why := self.failed()) is not None:
                raise AssertionError(why)
            events = self.current()
            return (
                bool(events) and events[-1]["event"] == "produced"
            ) or self.exit_status() == SUCCESS

        what = f"copier {self.spec.transactional_id} between produce and commit"
        wait_until(open_now, what=what, timeout=timeout, interval=0.005)

    def wait_done(self, timeout: float) -> None:
        def done() -> bool:
            if (why := self.failed()) is not None:
                raise AssertionError(why)
            return self.exit_status() == SUCCESS

        wait_until(
            done, what=f"copier {self.spec.transactional_id} done", timeout=timeout, interval=0.1
        )
        self.poll()

    # -- what the status says about transactions -------------------------------------------------
    def tags(self, event: str) -> dict[str, int]:
        """Transaction tag → record count, for every `event` (produced / committed / aborted)."""
        return {e["txn"]: e["count"] for e in self.poll() if e["event"] == event}
