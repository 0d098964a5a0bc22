"""ControlledShutdown (key 7): a broker about to stop asks the controller to move its leadership.

Owns: answering on the controller. Control requests are answered synchronously here, so the
request STARTS the controller's controlled-shutdown event and the answer lists the partitions the
broker still leads at that moment; as in Kafka, the stopping broker repeats the request (with a
backoff) until that list is empty or its retries run out. A request for an earlier registration
of the broker gets STALE_BROKER_EPOCH, a broker the controller does not know as live
BROKER_NOT_AVAILABLE, and a broker that is not the controller NOT_CONTROLLER.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from typing import Protocol

from brokers.controller import BrokerEpochMismatchError, ControllerError
from brokers.controller import control_api as rq
from brokers.handlers.control_fence import StaleBrokerEpochError
from brokers.handlers.control_requests import control_route
from brokers.handlers.errors import error_code_for
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode


class ShutdownTarget(Protocol):
    def request_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> list[tuple[str, int]]: ...


def handle(
    request: rq.ControlledShutdownRequest, controller: ShutdownTarget
) -> rq.ControlledShutdownResponse:
    try:
        remaining = controller.request_controlled_shutdown(request.broker_id, request.broker_epoch)
    except BrokerEpochMismatchError as exc:
        stale = StaleBrokerEpochError(str(exc))
        return rq.ControlledShutdownResponse(error_code=error_code_for(stale))
    except ControllerError as exc:  # NOT_CONTROLLER, BROKER_NOT_AVAILABLE, ...
        return rq.ControlledShutdownResponse(error_code=error_code_for(exc))
    return rq.ControlledShutdownResponse(
        error_code=ErrorCode.none,
        remaining_partitions=tuple(
            rq.RemainingPartition(topic_name=topic, partition_index=partition)
            for topic, partition in remaining
        ),
    )


def route(controller: ShutdownTarget) -> Route:
    return control_route(rq.CONTROLLED_SHUTDOWN, lambda r: handle(r, controller))
