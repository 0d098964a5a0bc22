"""What the kio filters ask of the policy stage for one request, and the budget of a request that
mutates nothing.

Owns: `Authorization`, the part of `TenantPolicy` a filter's ACL checks go through (so the one
authorization call site is `TenantPolicy.allowed` / `allowed_any`, whichever door the request
came in by: a Kafka session's kio path or an HTTP fleet call), and `NO_MUTATIONS`, the
controller-mutation budget of an API that creates and deletes no partitions (never exceeded,
charges nothing), used by both edges in place of a budget from the quota chain. Pure;
thread-safe (`NoMutations` holds no state).
"""

from __future__ import annotations

from typing import Final, Protocol

from gateway.policy.identity import Identity
from gateway.policy.policy import MutationBudget


class Authorization(Protocol):
    """The caller's ACL checks (`TenantPolicy` satisfies it)."""

    @property
    def identity(self) -> Identity: ...

    def allowed(self, operation: str, resource_type: str, name: str) -> bool: ...

    def allowed_any(self, operation: str, resource_type: str) -> bool: ...


class NoMutations:
    """The mutation budget of a request that mutates nothing."""

    def exceeded(self) -> bool:
        return False

    def record(self, partitions: int) -> None:
        return None


NO_MUTATIONS: Final = NoMutations()


def mutations_or_none(budget: MutationBudget | None) -> MutationBudget:
    """A request's mutation budget from `TenantPolicy.mutation_budget`, `NO_MUTATIONS` for None."""
    return NO_MUTATIONS if budget is None else budget
