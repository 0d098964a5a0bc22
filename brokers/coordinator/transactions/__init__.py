"""The transaction coordinator (KIP-98): `__transaction_state`, transactional ids and their state.

Modules: `records` (the topic's key/value formats), `metadata` (one transactional id's state and
Kafka's transitions), `state` (the per-partition cache and the writes to the topic), `loader`
(reading a partition back), `coordinator` (the client-facing operations), `completion` (markers
and the Complete* write), `housekeeping` (timed-out transactions, expired ids), `metrics`.
Only `brokers.log`/`records`/`wire`/`common` are imported below this package; the broker's
partitions and the marker channel come in through the protocols in `state_topic` and `markers`.
"""

TRANSACTION_STATE_TOPIC = "__transaction_state"
