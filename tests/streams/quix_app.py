"""A stateful quixstreams application with exactly-once processing, run by tests/streams as a child
process in the venv `infra/streams/quix` makes:
`python tests/streams/quix_app.py BOOTSTRAP GROUP INPUT OUTPUT STATE_DIR`.

Input records are keyed (str) with a JSON value `{"id": int, "amount": int}`; the app keeps a
running count and sum per key in a State store (RocksDB, backed by the changelog topic quixstreams
creates) and writes `{"id", "count", "sum"}` per input record, keyed the same, to OUTPUT. Nothing
here knows it runs on Pier: the settings are the ones an application would use anywhere, with a
stable `transactional.id` (one instance; a restart fences its killed predecessor at once instead
of waiting for the transaction timeout) and a short commit interval (many transactions per run).
"""

from __future__ import annotations

import sys
from typing import Any

# quixstreams lives in its own venv (infra/streams/quix), not in the one mypy runs from
from quixstreams import Application, State  # type: ignore[import-not-found, unused-ignore]


def aggregate(value: dict[str, Any], state: State[str, int]) -> dict[str, Any]:
    count = int(state.get("count", 0)) + 1
    total = int(state.get("sum", 0)) + int(value["amount"])
    state.set("count", count)
    state.set("sum", total)
    return {"id": value["id"], "count": count, "sum": total}


def main(bootstrap: str, group: str, source: str, sink: str, state_dir: str) -> None:
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once",
        commit_interval=0.5,
        state_dir=state_dir,
        producer_extra_config={"transactional.id": f"{group}-processor"},
        consumer_extra_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
        loglevel="INFO",
    )
    inputs = app.topic(source, key_deserializer="str", value_deserializer="json")
    outputs = app.topic(sink, key_serializer="str", value_serializer="json")
    app.dataframe(inputs).apply(aggregate, stateful=True).to_topic(outputs)
    app.run()


if __name__ == "__main__":
    main(*sys.argv[1:6])
