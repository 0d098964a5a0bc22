"""`raise_soft_limit`: the broker's soft open-file limit raised to the hard one at start, as the
JVM raises Kafka's (brokers/common/descriptors.py)."""

from __future__ import annotations

import resource

from brokers.common.descriptors import raise_soft_limit

NOFILE = resource.RLIMIT_NOFILE
INFINITY = resource.RLIM_INFINITY


class Limits:
    def __init__(self, soft: int, hard: int, refuse: bool = False) -> None:
        self.soft, self.hard, self.refuse = soft, hard, refuse

    def get(self, which: int) -> tuple[int, int]:
        assert which == NOFILE
        return self.soft, self.hard

    def set(self, which: int, limits: tuple[int, int]) -> None:
        assert which == NOFILE
        if self.refuse:
            raise ValueError("not allowed")
        self.soft, self.hard = limits


def test_a_soft_limit_under_the_hard_one_is_raised_to_it() -> None:
    limits = Limits(1024, 524288)
    assert raise_soft_limit(limits.get, limits.set, lambda: 1048576) == (1024, 524288)
    assert (limits.soft, limits.hard) == (524288, 524288)


def test_an_unlimited_hard_limit_is_taken_as_the_kernels_nr_open() -> None:
    limits = Limits(1024, INFINITY)
    assert raise_soft_limit(limits.get, limits.set, lambda: 1048576) == (1024, 1048576)
    assert (limits.soft, limits.hard) == (1048576, INFINITY)


def test_nothing_changes_when_soft_is_the_hard_limit_or_the_kernel_refuses() -> None:
    equal = Limits(20000, 20000)
    assert raise_soft_limit(equal.get, equal.set, lambda: 1048576) is None
    assert equal.soft == 20000
    refused = Limits(1024, 4096, refuse=True)
    assert raise_soft_limit(refused.get, refused.set, lambda: 1048576) is None
    assert refused.soft == 1024
    unknown = Limits(1024, INFINITY)
    assert raise_soft_limit(unknown.get, unknown.set, lambda: None) is None
