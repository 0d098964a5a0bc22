"""`billing.spark.local_cores`: the shuffle partitions a session gets by default (a task per core
of a `local[N]` master, a fixed few on a cluster)."""

from __future__ import annotations

import os

from billing.spark import local_cores


def test_local_masters_give_their_cores() -> None:
    assert local_cores("local") == 1
    assert local_cores("local[2]") == 2
    assert local_cores("local[3,2]") == 3  # local[N, maxFailures]
    assert local_cores("local[*]") == (os.cpu_count() or 1)


def test_other_masters_give_none() -> None:
    for master in ("spark://host:7077", "existing", "local[0]", "local[x]", "yarn"):
        assert local_cores(master) is None, master
