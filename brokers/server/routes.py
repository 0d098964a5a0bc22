"""The route table: API key → handler and the versions it serves. ApiVersions is derived from it.

Owns: `Route`, `RouteTable`. Routes are registered once at start-up; a second route for the same
API key is refused (a silent override would hide a wiring bug). Built before the event loop
serves; read-only afterwards, so safe to share.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kio.static.protocol import Entity

from brokers.server.context import RequestContext
from brokers.server.response import RawResponse

# What a handler answers: a kio response entity (encoded by the dispatcher), a hand-encoded body
# (Fetch's file regions), or nothing at all (acks=0 Produce).
Answer = Entity | RawResponse | bytes | None
RequestT_contra = TypeVar("RequestT_contra", bound=Entity, contravariant=True)


class Handler(Protocol[RequestT_contra]):
    """Serves one API: the decoded kio request of the version the header names."""

    def __call__(self, ctx: RequestContext, request: RequestT_contra, /) -> Awaitable[Answer]: ...


LegacyHandler = Callable[[RequestContext, memoryview, int], bytes | None]
# A route that reads its requests itself: (version, the body after the header) → the request its
# handler takes, or MalformedRequestError (Produce: its record sets stay views of the frame).
RawDecoder = Callable[[int, memoryview], Any]


@dataclass(frozen=True, slots=True)
class Route:
    """One API. Versions below `refused_below` are advertised but answered by `legacy` (Produce
    v0–2 are advertised for librdkafka's feature probes, then refused)."""

    api_key: int
    min_version: int
    max_version: int
    handler: Handler[Any]  # each handler annotates the request union it serves
    refused_below: int | None = None
    legacy: LegacyHandler | None = None
    name: str = ""
    decode: RawDecoder | None = None  # None: kio decodes the request

    def serves(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_legacy(self, version: int) -> bool:
        return self.refused_below is not None and version < self.refused_below


class DuplicateRouteError(ValueError):
    pass


class RouteTable:
    def __init__(self) -> None:
        self._routes: dict[int, Route] = {}

    def add(self, route: Route) -> None:
        if route.api_key in self._routes:
            raise DuplicateRouteError(f"api key {route.api_key} routed twice")
        if route.min_version > route.max_version:
            raise ValueError(f"api key {route.api_key}: empty version range")
        if route.refused_below is not None and route.legacy is None:
            raise ValueError(f"api key {route.api_key}: refused versions need a legacy handler")
        self._routes[route.api_key] = route

    def get(self, api_key: int) -> Route | None:
        return self._routes.get(api_key)

    def __iter__(self) -> Iterator[Route]:
        return iter(sorted(self._routes.values(), key=lambda r: r.api_key))

    def version_ranges(self) -> list[tuple[int, int, int]]:
        """(api_key, min, max) for every route: exactly what ApiVersions advertises."""
        return [(r.api_key, r.min_version, r.max_version) for r in self]
