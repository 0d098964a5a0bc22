"""Domain errors of the transaction coordinator.

Owns: the exceptions the coordinator's state topic raises (`StateTopicError` and its kinds) and
`TxnRecordError` for `__transaction_state` records that do not parse. The coordinator turns
them into Kafka error codes itself (its results are codes, as Kafka's callbacks are), so the
handlers never see these. Pure; thread-safe.
"""


class TransactionError(Exception):
    """Base of every transaction coordinator error."""


class StateTopicError(TransactionError):
    """A write to `__transaction_state` failed."""


class StateNotCoordinatorError(StateTopicError):
    """This broker no longer leads the partition (or its log failed): NOT_COORDINATOR."""


class StateNotAvailableError(StateTopicError):
    """The partition cannot take the write now (too few replicas, not committed in time, the
    topic not creatable yet): COORDINATOR_NOT_AVAILABLE, the client retries."""


class StateRecordTooLargeError(StateTopicError):
    """The state record does not fit the topic's limits: UNKNOWN_SERVER_ERROR, as Kafka."""


class TxnRecordError(TransactionError):
    """A `__transaction_state` key or value that does not parse."""


class TransactionConfigError(ValueError):
    """A transaction setting that cannot be used; the broker refuses to start."""
