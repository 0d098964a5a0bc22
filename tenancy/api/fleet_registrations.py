"""Which gateway processes are registered in the fleet's ZooKeeper, for the operator's fleet view.

Owns `FleetRegistrations`: with `pier admin-api --zookeeper HOST:PORT[/chroot]` (the gateways'
`zookeeper.connect`), `GET /v1/gateways` marks each gateway process `registered` when its
ephemeral znode `/pier/gateways/<id>.<incarnation>` exists (the znode through which it shares
quotas, docs/gateway.md "Quotas across gateways"; it disappears with the gateway's session). One
`get_children` per call, bounded by `timeout_s`; ZooKeeper down or slow gives None ("unknown"),
never an error or a hang of the route, and the session is started again on the next call. The
chroot must exist (a gateway creates it). Kazoo runs its own threads; `names()` runs the blocking
read in a worker thread, and a lock keeps the session's start to one caller: thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from aiohttp import web
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

log = logging.getLogger("pier.admin.fleet")
GATEWAYS_PATH = "/pier/gateways"  # written by each gateway (docs/gateway.md)
DEFAULT_TIMEOUT_S = 2.0


class FleetRegistrations:
    def __init__(self, connect: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.connect = connect
        self._timeout_s = timeout_s
        self._client: KazooClient | None = None
        self._lock = threading.Lock()

    async def names(self) -> frozenset[str] | None:
        """The znode names under /pier/gateways (`<id>.<incarnation>`), None when unknown."""
        return await asyncio.to_thread(self._read)

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.stop()
            client.close()

    def _read(self) -> frozenset[str] | None:
        try:
            client = self._session()
            children = client.get_children_async(GATEWAYS_PATH).get(timeout=self._timeout_s)
        except NoNodeError:
            return frozenset()
        except (KazooException, KazooTimeoutError, OSError) as exc:
            log.warning(
                "event=fleet_zookeeper_unreadable zookeeper=%s error=%s",
                self.connect,
                type(exc).__name__,
            )
            return None
        return frozenset(children)

    def _session(self) -> KazooClient:
        with self._lock:
            if self._client is None:
                client = KazooClient(hosts=self.connect, timeout=10.0)
                try:
                    client.start(self._timeout_s)
                except BaseException:
                    client.close()
                    raise
                self._client = client
            return self._client


def znode_name(gateway_id: str) -> str:
    """The znode a gateway reporting as `<id>/<incarnation>` registers: `<id>.<incarnation>`."""
    head, sep, incarnation = gateway_id.rpartition("/")
    return f"{head}.{incarnation}" if sep else gateway_id


FLEET_REGISTRATIONS = web.AppKey("pier.admin.fleet_registrations", FleetRegistrations)


def install(app: web.Application, connect: str) -> None:
    """Make `GET /v1/gateways` read registrations from `connect`; stopped with the app."""
    registrations = FleetRegistrations(connect)
    app[FLEET_REGISTRATIONS] = registrations

    async def stop(_app: web.Application) -> None:
        await asyncio.to_thread(registrations.close)

    app.on_cleanup.append(stop)
