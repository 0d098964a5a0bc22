"""Kafka's `meta.properties` in the data dir: the cluster id kept with the data.

Owns reading and writing it. A standalone broker generates the id on first start; in ZooKeeper
mode the id comes from `/cluster/id` and a data dir holding another one refuses to join.
Plain file I/O; call from one thread at a time.
"""

from __future__ import annotations

from pathlib import Path

META_PROPERTIES = "meta.properties"


def read_cluster_id(data_dir: Path) -> str | None:
    path = data_dir / META_PROPERTIES
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    return None


def write_cluster_id(data_dir: Path, cluster_id: str) -> str:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / META_PROPERTIES).write_text(f"version=1\ncluster.id={cluster_id}\n")
    return cluster_id
