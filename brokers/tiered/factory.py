"""Builds the configured remote store (TieredConfig.store). Call before the event loop serves:
the S3 store checks (and creates) its bucket, a blocking call."""

from __future__ import annotations

import logging

from brokers.tiered.config import S3_STORE, TieredConfig
from brokers.tiered.local_store import LocalDirStore
from brokers.tiered.store import RemoteStorageError, RemoteStore

_log = logging.getLogger("pier.tiered")


def build_store(config: TieredConfig) -> RemoteStore:
    if config.store == S3_STORE and config.s3 is not None:
        from brokers.tiered.s3_store import S3Store

        store = S3Store(config.s3)
        try:
            store.ensure_bucket()
        except RemoteStorageError as exc:  # a store down at start-up: copies retry later
            _log.warning("event=remote_store_unavailable error=%r", str(exc))
        return store
    return LocalDirStore(config.local_dir)
