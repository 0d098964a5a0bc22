"""The ZooKeeper-mode controller package; this module is its public surface for other components.

Handlers reach the controller only through these names (the layout table forbids importing its
submodules): `control_api`, the wire schemas of LeaderAndIsr / StopReplica / UpdateMetadata /
ControlledShutdown, and the errors a handler must tell apart. Importing it loads no kazoo code.
"""

from brokers.controller import requests as control_api
from brokers.controller.errors import ControllerError, ControllerMovedError


class BrokerEpochMismatchError(ControllerError):
    """A request from an earlier registration of a broker (its broker epoch is stale, KIP-380)."""


__all__ = ["BrokerEpochMismatchError", "ControllerError", "ControllerMovedError", "control_api"]
