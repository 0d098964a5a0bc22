"""Domain errors of the partition log (`brokers.log`).

Owns: the exception types raised by segments, indexes, the partition log, the log manager and
producer state. Nothing here knows Kafka error codes: `brokers.handlers` maps them in one place.
Pure definitions; thread-safe.
"""


class LogError(Exception):
    """Base of every log-level problem."""


class OffsetOutOfRangeError(LogError):
    """A read below the log start offset or past the log end offset (OFFSET_OUT_OF_RANGE)."""


class LogDirError(LogError):
    """A log directory that cannot be used: missing, not a directory, not writable, or locked."""


class StorageError(LogError):
    """A file operation of the log failed: disk full, I/O error (Kafka's KafkaStorageException,
    KAFKA_STORAGE_ERROR). Raised as such, the failed operation was undone: the log is as it was
    before it and accepts the next one (see docs/storage-errors.md)."""


class LogOfflineError(StorageError):
    """The log went offline after a storage failure it could not undo (or an fsync failure):
    every operation on it is refused until the broker restarts and recovery re-validates it."""


class CorruptIndexError(LogError):
    """An offset or time index file that fails its sanity check; the caller rebuilds it."""


class LogClosedError(LogError):
    """An operation on a log or segment that was already closed or deleted."""


class OutOfOrderSequenceError(LogError):
    """A producer batch whose sequence skips ahead (OUT_OF_ORDER_SEQUENCE_NUMBER)."""


class InvalidProducerEpochError(LogError):
    """A producer batch from a fenced (older) producer epoch (INVALID_PRODUCER_EPOCH)."""


class TransactionCoordinatorFencedError(LogError):
    """An end-transaction marker from a coordinator epoch older than the one last seen for the
    producer: a zombie coordinator (TRANSACTION_COORDINATOR_FENCED)."""


class DuplicateSequenceError(LogError):
    """A duplicate batch no longer matched to its offsets (DUPLICATE_SEQUENCE_NUMBER)."""


class InvalidConfigError(LogError):
    """A topic config that is unknown or whose value Kafka would refuse (INVALID_CONFIG).

    `name` is the config at fault; the message reads like Kafka's ConfigException.
    """

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(reason)
        self.name = name
        self.reason = reason


class InvalidTxnStateError(LogError):
    """A non-transactional batch from a producer with an open transaction (INVALID_TXN_STATE)."""


class CorruptSnapshotError(LogError):
    """A producer-state snapshot file that fails its version, size or CRC check; it is skipped."""


class CorruptLogError(LogError):
    """Segment bytes that fail a header scan outside recovery (KAFKA_STORAGE_ERROR)."""


class UnexpectedAppendOffsetError(LogError):
    """Replicated batches whose offsets do not follow the log end offset, or go backwards."""


class CorruptCheckpointError(LogError):
    """A checkpoint file whose version, count or lines cannot be parsed."""
