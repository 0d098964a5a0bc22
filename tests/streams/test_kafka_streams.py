"""A Kafka Streams application (the Java library) with exactly_once_v2 keeps exact counts through
the SIGKILL of one of its instances (issue 14, Acceptance 2).

The app is infra/streams' word count: input lines are split into words, re-keyed by word through a
repartition topic, counted in a state store (changelog topic) and every new count goes to the
output topic. Two instances run in separate JVMs with separate state directories on three brokers
(RF 3, min ISR 2). A feeder produces N known sentences at a steady pace; once a read_committed
reader of the output has seen a quarter of the words counted, one instance is killed with SIGKILL
(its open transaction, its uncommitted state and its group membership left behind) and started
again on its state directory. The final count of every word, the latest value per word read with
read_committed, must equal the true count: a record processed twice, lost, or an aborted write
seen, shows as a wrong count. Counts of a word must also only grow, output offset after output
offset (a restored store that went back in time would write a smaller count).

The slow soak does the same with three times the input and three kills (a, b, a).
"""

from __future__ import annotations

import random
import re
import struct
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import remember_log
from tests.polling import wait_until
from tests.streams.conftest import Target
from tests.streams.harness import App, Feeder, OutputReader, create_topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

SENTENCES = 2000
PER_SECOND = 150.0  # about 13 s of input: the kill lands while sentences still arrive
INPUT_PARTITIONS, OUTPUT_PARTITIONS = 4, 3
START_S = 150.0  # two JVMs starting and joining on a shared 2-core machine
FINISH_S = 180.0
# fmt: off
VOCABULARY = (
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "stream", "table", "state",
    "store", "commit", "abort", "exactly", "once", "broker", "leader", "replica", "partition",
    "offset", "record", "batch", "marker", "fence", "epoch", "producer", "consumer", "group",
    "topic", "kafka", "pier", "count", "word",
)
# fmt: on
STATE_LINE = re.compile(r"^state=(\w+)$", re.MULTILINE)
# Settings of each instance: a killed member leaves its group after 6 s, not Streams' 45 s.
APP_CONFIG = (
    "consumer.session.timeout.ms=6000",
    "consumer.heartbeat.interval.ms=1000",
    "num.stream.threads=1",
)


def sentences(count: int, seed: int = 14) -> list[str]:
    draw = random.Random(seed)
    return [" ".join(draw.choices(VOCABULARY, k=draw.randint(3, 8))) for _ in range(count)]


def expected_counts(lines: list[str]) -> Counter[str]:
    return Counter(word for line in lines for word in line.split())


def states(app: App) -> list[str]:
    """The state lines the app printed since its latest start."""
    text = app.log_text()
    return STATE_LINE.findall(text[text.rfind("---- start") :])


def is_running(app: App) -> bool:
    app.assert_running()
    seen = states(app)
    assert "ERROR" not in seen, f"{app.name} went to ERROR: {seen}"
    return bool(seen) and seen[-1] == "RUNNING"


class Counts:
    """The output read with read_committed: the latest count per word, checked as it is read."""

    def __init__(self, bootstrap: str, topic: str, expected: Counter[str]) -> None:
        self.reader = OutputReader(bootstrap, topic)
        self.expected = expected
        self.latest: dict[str, int] = {}

    def read(self) -> dict[str, int]:
        for record in self.reader.drain():
            assert record.key is not None and record.value is not None, record
            word = record.key.decode()
            (count,) = struct.unpack(">q", record.value)
            before = self.latest.get(word, 0)
            assert count > before, f"{word!r}: count {count} after {before} ({record})"
            assert count <= self.expected[word], (
                f"{word!r} counted {count} times, it occurs {self.expected[word]} times ({record})"
            )
            self.latest[word] = count
        return self.latest

    @property
    def progress(self) -> int:
        return sum(self.latest.values())

    def reached(self, words: float) -> Callable[[], bool]:
        """A check for `wait_until`: at least `words` words counted."""
        return lambda: bool(self.read()) and self.progress >= words


def instance(wordcount: Path, target: Target, tmp: Path, name: str, topics: tuple[str, str]) -> App:
    state_dir = tmp / f"state-{name}"
    argv = [
        str(wordcount),
        "run",
        "--bootstrap",
        target.bootstrap,
        "--application-id",
        "wordcount-eos",
        "--input",
        topics[0],
        "--output",
        topics[1],
        "--state-dir",
        str(state_dir),
        "--replication-factor",
        str(target.replication_factor),
    ]
    for setting in APP_CONFIG:
        argv += ["--config", setting]
    return App(name, argv, tmp / f"{name}.log", {"PIER_STREAMS_LOG_LEVEL": "info"})


def run_word_count(
    target: Target,
    wordcount: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    *,
    sentence_count: int,
    kill_at: tuple[float, ...],
) -> None:
    """Feed `sentence_count` sentences; at each share of `kill_at` (of the words counted) kill an
    instance, a then b then a..., and start it again; then every count must be exact."""
    topics = ("words-in", "counts-out")
    rf = target.replication_factor
    create_topics(
        target.bootstrap, {topics[0]: (INPUT_PARTITIONS, rf), topics[1]: (OUTPUT_PARTITIONS, rf)}
    )
    lines = sentences(sentence_count)
    expected = expected_counts(lines)
    total = sum(expected.values())
    apps = [instance(wordcount, target, tmp_path, n, topics) for n in ("a", "b")]
    for app in apps:
        remember_log(request.node, f"streams instance {app.name}", app.log_path)
    counts = Counts(target.bootstrap, topics[1], expected)
    feeder: Feeder | None = None
    try:
        for app in apps:
            app.start()
        wait_until(
            lambda: all(is_running(app) for app in apps),
            what="both instances RUNNING",
            timeout=START_S,
            interval=0.5,
        )
        feeder = Feeder(
            target.bootstrap, topics[0], [(None, s) for s in lines], per_second=PER_SECOND
        )
        for round_, share in enumerate(kill_at):
            wait_until(
                counts.reached(share * total),
                what=f"{share:.0%} of {total} words counted",
                timeout=FINISH_S,
                interval=0.2,
            )
            victim = apps[round_ % len(apps)]
            victim.kill()
            at_kill = counts.progress
            print(f"killed {victim.name} at {at_kill}/{total} words counted, {feeder.sent} sent")
            assert at_kill < total, f"the kill was not mid-run: {at_kill}/{total} words counted"
            victim.start()
        feeder.finish()
        wait_until(
            lambda: counts.read() == expected,
            what=f"every count exact ({total} words, {len(expected)} distinct)",
            timeout=FINISH_S,
            interval=0.5,
        )
        # The restarted instances joined again (the group runs both).
        wait_until(
            lambda: all(is_running(app) for app in apps),
            what="both instances RUNNING after the restarts",
            timeout=START_S,
            interval=0.5,
        )
        assert counts.read() == expected
    finally:
        if feeder is not None:
            feeder.stop()
        counts.reader.close()
        for app in apps:
            app.stop()


def test_word_count_is_exact_through_an_instance_kill(
    three_brokers: Target, wordcount: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    run_word_count(
        three_brokers, wordcount, tmp_path, request, sentence_count=SENTENCES, kill_at=(0.25,)
    )


@pytest.mark.slow
def test_word_count_is_exact_through_three_kills(
    three_brokers: Target, wordcount: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    run_word_count(
        three_brokers,
        wordcount,
        tmp_path,
        request,
        sentence_count=3 * SENTENCES,
        kill_at=(0.2, 0.45, 0.7),
    )
