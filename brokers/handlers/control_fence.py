"""The broker side of controller fencing: which controller requests a broker still obeys.

Owns: `BrokerFence` (this broker's current broker epoch and the newest controller epoch it has
obeyed) and the two errors its check raises. As Kafka's `KafkaApis`:
- a request whose controller epoch is older than one already obeyed comes from a deposed
  controller (its ZooKeeper session was lost and another was elected): STALE_CONTROLLER_EPOCH;
- a request addressed to an older broker epoch (the czxid of an earlier registration, KIP-380)
  was meant for this broker's previous incarnation: STALE_BROKER_EPOCH. Epoch -1 means "not
  stamped" and is admitted, as Kafka does for controllers that predate broker epochs.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from brokers.replication.errors import StaleControllerEpochError

__all__ = ["FENCED", "BrokerFence", "StaleBrokerEpochError", "StaleControllerEpochError"]


class StaleBrokerEpochError(Exception):
    """A controller request addressed to an earlier registration of this broker."""


FENCED = (StaleBrokerEpochError, StaleControllerEpochError)
"""What `BrokerFence.admit` raises: the request is answered with the error and ignored."""


class BrokerFence:
    def __init__(self) -> None:
        self.broker_epoch = -1  # set on each (re-)registration
        self.controller_epoch = -1

    def on_registered(self, broker_epoch: int) -> None:
        """`BrokerRegistrar`'s callback: -1 while unregistered (session expired)."""
        self.broker_epoch = broker_epoch

    def admit(self, controller_epoch: int, broker_epoch: int) -> None:
        """Raise when the request must be ignored; else remember the controller epoch."""
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            raise StaleBrokerEpochError(
                f"request for broker epoch {broker_epoch}, current is {self.broker_epoch}"
            )
        if controller_epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"controller epoch {controller_epoch} is older than {self.controller_epoch}"
            )
        self.controller_epoch = controller_epoch
