"""The cluster id in ZooKeeper mode: taken from `/cluster/id`, kept in meta.properties, and a data
dir of another cluster refuses to join (Kafka's InconsistentClusterIdException)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from brokers.controller import zk_paths
from brokers.log.meta_properties import read_cluster_id, write_cluster_id
from tests.cluster_probes import SETTLE_S, ZNODE_MISSING, metadata_of, zk_read
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_broker_takes_the_cluster_id_from_zookeeper_and_refuses_another(
    chroot: str, broker_factory: Any, tmp_path: Path
) -> None:
    broker = broker_factory(node_id=1, zookeeper=chroot)
    data, _ = wait_until(
        lambda: zk_read(chroot, zk_paths.CLUSTER_ID),
        what="/cluster/id written",
        timeout=SETTLE_S,
        retry_on=ZNODE_MISSING,
    )
    cluster_id = zk_paths.decode_cluster_id(data)
    wait_until(
        lambda: metadata_of(broker).cluster_id == cluster_id,
        what=f"the broker's metadata names cluster {cluster_id}",
        timeout=SETTLE_S,
    )
    assert read_cluster_id(broker.data_dir) == cluster_id

    foreign = tmp_path / "foreign"
    write_cluster_id(foreign, "another-cluster-0000000")
    started = subprocess.run(
        [str(Path(sys.executable).parent / "pier"), "broker", "--zookeeper", chroot, "--node-id", "2",
         "--port", "0", "--data-dir", str(foreign)],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert started.returncode == 2
    assert "does not match the stored cluster id another-cluster-0000000" in started.stderr
    assert "Traceback" not in started.stderr
    assert read_cluster_id(foreign) == "another-cluster-0000000"  # nothing overwritten
