"""Billing test fixtures: one SparkSession for the whole session (local[2], few shuffle partitions:
the machine is shared), a broker with `__usage`, and a migrated tenancy database."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from infra.stack import BrokerProcess
from tests.integration.billing.usage_gen import create_usage_topic
from tests.tenancy_fixtures import *  # noqa: F403


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from billing.spark import spark_session

    session = spark_session("local[2]", shuffle_partitions=2)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def usage_broker(broker: BrokerProcess) -> BrokerProcess:
    create_usage_topic(broker.bootstrap)
    return broker


@pytest.fixture
def sqlite_url(tmp_path: Any) -> str:
    """A SQLite tenancy database at Alembic head (most billing tests need one backend only)."""
    from tenancy.store import TenantStore

    url = f"sqlite:///{tmp_path / 'tenancy.db'}"
    with TenantStore.open(url) as store:
        store.upgrade()
    return url


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Spark standalone master and worker (from the pyspark package): `.master_url`,
    `.worker` (the worker daemon, whose children are the executors)."""
    from infra.spark_cluster import start_spark_cluster

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver, in `pier billing run`
    cluster = start_spark_cluster(tmp_path_factory.mktemp("spark-cluster"), cores=2, memory="1g")
    try:
        yield cluster
    finally:
        cluster.stop()
