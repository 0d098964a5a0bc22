"""Controller metrics named after Kafka's `kafka.controller` MBeans.

Owns:
- `KafkaController` gauges — `ControllerCollector`: ActiveControllerCount, OfflinePartitionsCount,
  GlobalPartitionCount, GlobalTopicCount, PreferredReplicaImbalanceCount, FencedBrokerCount
  (KRaft's name; here the registered brokers whose listener refuses the controller, which it
  never elects: a killed broker until its session expires) and ControllerState (the
  value Kafka gives the state of the running event, plus a `_info` gauge labelled with its name);
  all 0 (state Idle) on a broker that is not the active controller, as in Kafka.
- `ControllerStats` timers — `ControllerStats` is the controller's `event_observer` hook: it
  remembers the running event's state and times each event in a histogram per state
  (`<State>RateAndTimeMs`; BrokerChange keeps its historical name LeaderElectionRateAndTimeMs).
Event names map to states by keywords, so events added later (reassignment, config changes)
land in a sensible state without an edit here; anything else counts as Idle.

Concurrency: the observer runs on the event loop; histograms are prometheus-client objects
(thread-safe). The collector runs on the metrics HTTP thread and only reads: it copies the
context's dicts before iterating (C-level copies, atomic under the GIL), so a scrape may be one
event stale, never broken.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from brokers.common.clock import Clock
from brokers.controller.context import ControllerContext

# Kafka's ControllerState values (kafka.controller.ControllerState), exported as the gauge value.
CONTROLLER_STATES: dict[str, int] = {
    "Idle": 0,
    "ControllerChange": 1,
    "BrokerChange": 2,
    "TopicChange": 3,
    "TopicDeletion": 4,
    "AlterPartitionReassignment": 5,
    "AutoLeaderBalance": 6,
    "ManualLeaderBalance": 7,
    "ControlledShutdown": 8,
    "IsrChange": 9,
    "LeaderAndIsrResponseReceived": 10,
    "LogDirChange": 11,
    "ControllerShutdown": 12,
    "UncleanLeaderElectionEnable": 13,
    "TopicUncleanLeaderElectionEnable": 14,
    "ListPartitionReassignment": 15,
    "UpdateMetadataResponseReceived": 16,
}
# Controller event (function) names → state, by the first keyword the name contains (event names
# such as `broker_change`, `partition_change[t]`, `alter_reassignments`, `shutdown`, `elect`), so
# events renamed or added later land in a sensible state without an edit here.
_KEYWORD_STATES = (
    ("list", "ListPartitionReassignment"),
    ("reassign", "AlterPartitionReassignment"),
    ("unclean", "TopicUncleanLeaderElectionEnable"),
    ("partition_change", "TopicChange"),
    ("delet", "TopicDeletion"),
    ("shutdown", "ControlledShutdown"),
    ("rebalance", "AutoLeaderBalance"),
    ("elect", "ManualLeaderBalance"),
    ("broker", "BrokerChange"),
    ("isr", "IsrChange"),
    ("topic", "TopicChange"),
    ("failover", "ControllerChange"),
)
_TIMED_STATES = frozenset(state for _, state in _KEYWORD_STATES)
# Controller events take milliseconds to seconds (ZooKeeper round trips); Kafka's timers are in ms.
_EVENT_BUCKETS_MS = (1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 10000.0)


def controller_state(event_name: str | None) -> str:
    """The Kafka controller state for a running event (`None`: Idle; unknown: Idle)."""
    if event_name is None:
        return "Idle"
    lowered = event_name.lower()
    return next((state for key, state in _KEYWORD_STATES if key in lowered), "Idle")


def rate_and_time_metric(state: str) -> str:
    """Kafka's ControllerStats timer name for a state (BrokerChange kept its pre-state name)."""
    base = "LeaderElection" if state == "BrokerChange" else state
    return f"kafka_controller_controllerstats_{base.lower()}rateandtimems"


class ControllerView(Protocol):
    """What the collector reads of `brokers.controller.controller.Controller`: whether its term is
    running (Kafka's isActive) and its context."""

    @property
    def active(self) -> bool: ...

    @property
    def context(self) -> ControllerContext: ...


class ControllerStats:
    """The controller's `event_observer`: remembers the running event's state and times it."""

    def __init__(self, registry: CollectorRegistry, clock: Clock) -> None:
        self._clock = clock
        self.state = "Idle"
        self._event: str | None = None
        self._started = 0.0
        self._timers = {
            state: Histogram(
                rate_and_time_metric(state),
                f"Time to process {state} controller events, ms ({state} RateAndTimeMs).",
                buckets=_EVENT_BUCKETS_MS,
                registry=registry,
            )
            for state in CONTROLLER_STATES
            if state in _TIMED_STATES  # only states Pier's controller runs: no empty families
        }

    def __call__(self, event_name: str | None) -> None:
        now = self._clock.monotonic()
        timer = self._timers.get(self.state) if self._event is not None else None
        if timer is not None:
            timer.observe((now - self._started) * 1000)
        self._event, self._started = event_name, now
        self.state = controller_state(event_name)


class ControllerCollector(Collector):
    """KafkaController gauges from the controller context; zeros unless this broker controls."""

    def __init__(self, controller: ControllerView, stats: ControllerStats) -> None:
        self._controller = controller
        self._stats = stats

    def collect(self) -> Iterator[GaugeMetricFamily]:
        active = self._controller.active
        ctx = self._controller.context
        figures = _controller_figures(ctx) if active else dict.fromkeys(_FIGURE_DOCS, 0)
        prefix = "kafka_controller_kafkacontroller_"
        yield GaugeMetricFamily(
            prefix + "activecontrollercount",
            "1 on the active controller, 0 elsewhere (ActiveControllerCount).",
            value=int(active),
        )
        for name, doc in _FIGURE_DOCS.items():
            yield GaugeMetricFamily(prefix + name, doc, value=figures[name])
        state = self._stats.state if active else "Idle"
        yield GaugeMetricFamily(
            prefix + "controllerstate",
            "Kafka's ControllerState value of the running event (0 Idle, 2 BrokerChange, ...).",
            value=CONTROLLER_STATES[state],
        )
        info = GaugeMetricFamily(
            prefix + "controllerstate_info",
            "1 for the controller state now running, by Kafka's state name.",
            labels=["state"],
        )
        info.add_metric([state], 1)
        yield info


_FIGURE_DOCS = {
    "offlinepartitionscount": "Partitions without a live leader (OfflinePartitionsCount).",
    "globalpartitioncount": "Partitions in the cluster (GlobalPartitionCount).",
    "globaltopiccount": "Topics in the cluster (GlobalTopicCount).",
    "preferredreplicaimbalancecount": "Partitions not led by their preferred replica.",
    "fencedbrokercount": "Registered brokers refusing the controller's connections, never"
    " elected leader (FencedBrokerCount).",
}


def _controller_figures(ctx: ControllerContext) -> dict[str, int]:
    """Kafka's KafkaController gauges; topics queued for deletion are left out, as Kafka does."""
    deleting = set(ctx.topics_to_delete)
    assignments = [(tp, a) for tp, a in list(ctx.assignments.items()) if tp.topic not in deleting]
    leadership = dict(ctx.leadership)
    live = set(ctx.live_brokers)
    fenced = live & set(ctx.unreachable)
    offline = imbalanced = 0
    for tp, assignment in assignments:
        state = leadership.get(tp)
        if state is None or state.leader not in live:
            offline += 1
        if state is not None and assignment.replicas and state.leader != assignment.replicas[0]:
            imbalanced += 1
    return {
        "offlinepartitionscount": offline,
        "globalpartitioncount": len(assignments),
        "globaltopiccount": len({tp.topic for tp, _ in assignments}),
        "preferredreplicaimbalancecount": imbalanced,
        "fencedbrokercount": len(fenced),
    }
