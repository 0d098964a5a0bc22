"""A Python stream processor (quixstreams, `processing_guarantee="exactly-once"`) runs a stateful
app unchanged and recovers its state after a kill (issue 14, Acceptance 3).

The app (tests/streams/quix_app.py, in quixstreams' own venv: infra/streams/quix) keeps a running count and sum per key in a State store and
writes one output record per input record. A feeder produces N known records at a steady pace;
once a read_committed reader has seen a quarter of them in the output, the app is killed with
SIGKILL and started again on an EMPTY state directory, so its state can only come back from the
changelog topic (and only the committed part of it may). Read with read_committed, the output
must hold every input id exactly once, and per key the counts must run 1, 2, 3, ... with each sum
the previous sum plus the record's amount, across the kill: a record processed twice, a lost one,
an aborted write read back into the state or a state that was not recovered all break that chain.
The slow soak does the same with three times the input and three kills.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import remember_log
from tests.polling import wait_until
from tests.streams.conftest import Target
from tests.streams.harness import App, Feeder, OutputReader, create_topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

APP = Path(__file__).resolve().parent / "quix_app.py"
RECORDS = 6000
PER_SECOND = 400.0  # about 15 s of input: the kill lands while records still arrive
KEYS = 12
PARTITIONS = 3
FINISH_S = 150.0


def amount(record_id: int) -> int:
    return record_id * 7 % 13 + 1


def inputs(count: int) -> list[tuple[str, str]]:
    return [(f"k{i % KEYS}", json.dumps({"id": i, "amount": amount(i)})) for i in range(count)]


class Aggregates:
    """The output read with read_committed, every record checked against the chain per key."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.reader = OutputReader(bootstrap, topic)
        self.seen: set[int] = set()
        self.last: dict[str, tuple[int, int]] = {}  # key -> (count, sum)

    def read(self) -> int:
        for record in self.reader.drain():
            assert record.key is not None and record.value is not None, record
            key = record.key.decode()
            value = json.loads(record.value)
            record_id = value["id"]
            assert record_id not in self.seen, f"id {record_id} twice in the output ({record})"
            self.seen.add(record_id)
            count, total = self.last.get(key, (0, 0))
            expected = {"id": record_id, "count": count + 1, "sum": total + amount(record_id)}
            assert value == expected, f"{key}: {value} after count {count}, sum {total}"
            self.last[key] = (value["count"], value["sum"])
        return len(self.seen)


def run_quix(
    target: Target,
    quix_python: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    *,
    record_count: int,
    kill_at: tuple[float, ...],
) -> None:
    """Feed `record_count` records; at each share of `kill_at` (of the records in the output) kill
    the app and start it again on a new, empty state directory; then check the whole output."""
    source, sink, group = "amounts", "running-totals", "quix-eos"
    create_topics(target.bootstrap, {source: (PARTITIONS, 1), sink: (PARTITIONS, 1)})
    records = inputs(record_count)

    def app_in(run: int) -> App:
        state_dir = str(tmp_path / f"state-{run}")
        argv = [str(quix_python), str(APP), target.bootstrap, group, source, sink, state_dir]
        log = tmp_path / f"quix-app-{run}.log"
        remember_log(request.node, f"quixstreams app, run {run}", log)
        return App(f"quix run {run}", argv, log, {"PYTHONUNBUFFERED": "1"})

    app = app_in(1)
    aggregates = Aggregates(target.bootstrap, sink)
    feeder = Feeder(target.bootstrap, source, records, per_second=PER_SECOND)

    def processed(count: float) -> Callable[[], bool]:
        def check() -> bool:
            app.assert_running()
            return aggregates.read() >= count

        return check

    try:
        app.start()
        for run, share in enumerate(kill_at, start=2):
            wait_until(
                processed(share * record_count),
                what=f"{share:.0%} of {record_count} records processed",
                timeout=FINISH_S,
            )
            app.kill()
            at_kill = len(aggregates.seen)
            print(f"killed at {at_kill}/{record_count} records in the output, {feeder.sent} sent")
            assert at_kill < record_count, f"not mid-run: {at_kill}/{record_count} processed"
            # A new, empty state directory: the state can only come back from the changelog.
            app = app_in(run)
            app.start()
        feeder.finish()
        wait_until(
            processed(record_count), what=f"all {record_count} records processed", timeout=FINISH_S
        )
        assert aggregates.read() == record_count
        assert aggregates.seen == set(range(record_count))
        per_key = Counter(key for key, _ in records)
        sums: Counter[str] = Counter()
        for key, value in records:
            sums[key] += json.loads(value)["amount"]
        assert aggregates.last == {key: (per_key[key], sums[key]) for key in per_key}
        app.assert_running()
    finally:
        feeder.stop()
        aggregates.reader.close()
        app.stop()


def test_quixstreams_exactly_once_recovers_its_state_after_a_kill(
    one_broker: Target, quix_python: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    run_quix(one_broker, quix_python, tmp_path, request, record_count=RECORDS, kill_at=(0.25,))


@pytest.mark.slow
def test_quixstreams_exactly_once_through_three_kills(
    one_broker: Target, quix_python: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    run_quix(
        one_broker,
        quix_python,
        tmp_path,
        request,
        record_count=3 * RECORDS,
        kill_at=(0.2, 0.45, 0.7),
    )
