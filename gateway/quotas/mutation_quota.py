"""`controller_mutation_rate` (KIP-599): a token bucket per sensor key, and one request's budget.

Each created, deleted or added partition costs one token; the bucket refills at the quota rate up
to a burst of `quota.window.num` × `quota.window.size.seconds` × rate (Kafka's `TokenBucket`).
Strict requests (CreateTopics ≥ 6, DeleteTopics ≥ 5, CreatePartitions ≥ 3) refuse a topic with
THROTTLING_QUOTA_EXCEEDED while the bucket is below zero and otherwise take what they need, even
into debt; older versions are always accepted and throttled once the bucket is below zero
(`StrictControllerMutationQuota` / `PermissiveControllerMutationQuota`). The throttle time is how
long the bucket takes to climb back to zero. A new bucket starts full: Kafka's starts empty at
epoch 0 and so is full at any real clock. Idle buckets expire like rate sensors. Given
`UnitCounters`, the tokens taken here are counted for the fleet and other gateways' come back
through `apply` (`gateway.quotas.shared_units`): one bucket per sensor across the fleet. Runs on
the event loop; not thread-safe.
"""

from __future__ import annotations

from gateway.quotas.client_quotas import INACTIVE_SENSOR_EXPIRY_MS, IdleSensors, SensorKey
from gateway.quotas.shared_units import PEER_DEBT_MS, UnitCounters
from gateway.quotas.throttle import token_throttle_time_ms

THROTTLING_QUOTA_EXCEEDED = 89
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
STRICT_SINCE = {19: 6, 20: 5, 37: 3}  # CreateTopics, DeleteTopics, CreatePartitions (KIP-599)


def is_strict(api_key: int, api_version: int) -> bool:
    """Whether this request refuses topics over the quota rather than throttling afterwards."""
    since = STRICT_SINCE.get(api_key)
    return since is not None and api_version >= since


class TokenBucket:
    """Tokens refilled at `rate` per second up to `burst`; records may push it below zero.
    A new bucket is full at its first use."""

    __slots__ = ("last_update_ms", "tokens")

    def __init__(self) -> None:
        self.tokens: float | None = None
        self.last_update_ms = 0

    def measure(self, rate: float, burst: float, now_ms: int) -> float:
        return self._refill(rate, burst, now_ms)

    def record(self, permits: float, rate: float, burst: float, now_ms: int) -> float:
        """Take `permits`; the tokens left."""
        self.tokens = min(burst, self._refill(rate, burst, now_ms) - permits)
        return self.tokens

    def _refill(self, rate: float, burst: float, now_ms: int) -> float:
        """Refill up to `now_ms`; a time before the last update (permits learnt late) refills
        nothing and is taken as that update's."""
        if self.tokens is None:
            tokens = burst
        else:
            elapsed = max(0, now_ms - self.last_update_ms)
            tokens = min(burst, self.tokens + rate * elapsed / 1000)
        self.tokens, self.last_update_ms = tokens, max(now_ms, self.last_update_ms)
        return tokens


class ControllerMutationQuota:
    """The token buckets of every (tenant, user, client-id) sensor key."""

    def __init__(
        self,
        *,
        samples: int = 11,
        window_s: int = 1,
        expire_after_ms: int = INACTIVE_SENSOR_EXPIRY_MS,
        counters: UnitCounters | None = None,
    ) -> None:
        self.samples = samples
        self.window_s = window_s
        self._counters = counters
        self.buckets: IdleSensors[SensorKey, TokenBucket] = IdleSensors(
            TokenBucket, expire_after_ms
        )

    def burst(self, rate: float) -> float:
        return self.samples * self.window_s * rate

    def tokens(self, key: SensorKey, rate: float, now_ms: int) -> float:
        """The tokens left in `key`'s bucket at `now_ms` (a new bucket is full)."""
        return self.buckets.touch(key, now_ms).measure(rate, self.burst(rate), now_ms)

    def take(self, key: SensorKey, permits: int, rate: float, now_ms: int) -> float:
        """Take `permits` tokens (the bucket may go below zero; counted for the fleet); the
        tokens left."""
        if self._counters is not None:
            self._counters.add(CONTROLLER_MUTATION_RATE, key, permits, now_ms)
        return self.apply(key, permits, rate, now_ms)

    def apply(self, key: SensorKey, permits: int, rate: float, at_ms: int) -> float:
        """Take `permits` another gateway took (learnt at `at_ms`) without counting them here,
        leaving the bucket at most `PEER_DEBT_MS` of the rate below zero."""
        bucket = self.buckets.touch(key, at_ms)
        burst = self.burst(rate)
        floor = -rate * PEER_DEBT_MS / 1000
        tokens = bucket.measure(rate, burst, at_ms)
        return bucket.record(min(permits, max(0.0, tokens - floor)), rate, burst, at_ms)

    def throttle_time_ms(self, key: SensorKey, rate: float | None, now_ms: int) -> int:
        """How long until `key`'s bucket is back to zero (0 when it is not below zero)."""
        if rate is None or self.buckets.get(key) is None:
            return 0
        tokens = self.tokens(key, rate, now_ms)
        return token_throttle_time_ms(tokens, rate) if tokens < 0 else 0

    def budget(
        self, key: SensorKey, rate: float | None, *, strict: bool, now_ms: int
    ) -> MutationBudget:
        """The budget of one CreateTopics / DeleteTopics / CreatePartitions request at `now_ms`."""
        return MutationBudget(self, key, rate, strict=strict, now_ms=now_ms)


class MutationBudget:
    """One request's view of its bucket: `exceeded()` before each topic (strict requests refuse
    the topic when it says so), `record(partitions)` for each topic carried out."""

    def __init__(
        self,
        quota: ControllerMutationQuota,
        key: SensorKey,
        rate: float | None,
        *,
        strict: bool,
        now_ms: int,
    ) -> None:
        self._quota, self._key, self._rate = quota, key, rate
        self.strict = strict
        self.now_ms = now_ms
        self._throttle_ms = 0
        self._throttled_at_ms = now_ms

    def exceeded(self) -> bool:
        if not self.strict or self._rate is None:
            return False
        tokens = self._quota.tokens(self._key, self._rate, self.now_ms)
        if tokens < 0:
            self._note_throttle(tokens)
            return True
        return False

    def record(self, partitions: int) -> None:
        if self._rate is None:
            return
        tokens = self._quota.take(self._key, partitions, self._rate, self.now_ms)
        if not self.strict and tokens < 0:
            self._note_throttle(tokens)

    def throttle_time_ms(self, now_ms: int) -> int:
        """The throttle the request earned, less the time since it was earned (as Kafka)."""
        return max(0, self._throttle_ms - (now_ms - self._throttled_at_ms))

    def _note_throttle(self, tokens: float) -> None:
        assert self._rate is not None
        self._throttle_ms = token_throttle_time_ms(tokens, self._rate)
        self._throttled_at_ms = self.now_ms
