"""Which composition root builds a broker: ZooKeeper mode when `zookeeper.connect` is set.

Owns: `build_broker`, the entry point of `pier broker`. Pure dispatch; call before the event loop
serves.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from brokers.app.runtime import Broker
from brokers.app.standalone import build_standalone
from brokers.app.zk_mode import build_zk_broker
from brokers.common.clock import SYSTEM_CLOCK, Clock
from brokers.common.config import BrokerConfig


def build_broker(
    config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK, registry: CollectorRegistry | None = None
) -> Broker:
    if config.zookeeper_connect is not None:
        return build_zk_broker(config, clock=clock, registry=registry)
    return build_standalone(config, clock=clock, registry=registry)
