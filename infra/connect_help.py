"""Copy-paste snippets that show a developer how to reach the local stack with each Kafka client.

Pure text built from the real bootstrap address; no I/O. Kept apart from `up_main` so the gateway
(SASL credentials) and the admin API can add their own sections later.
"""

from __future__ import annotations

DEMO_TOPIC = "demo"


def client_snippets(bootstrap: str, topic: str = DEMO_TOPIC) -> str:
    """How to produce and consume with confluent-kafka, kafka-python, aiokafka and kcat."""
    sections = [
        ("confluent-kafka", _confluent_kafka(bootstrap, topic)),
        ("kafka-python", _kafka_python(bootstrap, topic)),
        ("aiokafka", _aiokafka(bootstrap, topic)),
        ("kcat", _kcat(bootstrap, topic)),
    ]
    return "\n".join(f"--- {name} ---\n{body}" for name, body in sections)


def _confluent_kafka(bootstrap: str, topic: str) -> str:
    return f"""\
from confluent_kafka import Consumer, Producer

producer = Producer({{"bootstrap.servers": "{bootstrap}"}})
producer.produce("{topic}", b"hello")
producer.flush()
consumer = Consumer(
    {{"bootstrap.servers": "{bootstrap}", "group.id": "demo", "auto.offset.reset": "earliest"}}
)
consumer.subscribe(["{topic}"])
print(consumer.poll(10).value())
consumer.close()
"""


def _kafka_python(bootstrap: str, topic: str) -> str:
    return f"""\
from kafka import KafkaConsumer, KafkaProducer

KafkaProducer(bootstrap_servers="{bootstrap}").send("{topic}", b"hello").get(timeout=10)
for message in KafkaConsumer(
    "{topic}",
    bootstrap_servers="{bootstrap}",
    auto_offset_reset="earliest",
    consumer_timeout_ms=5000,
):
    print(message.value)
"""


def _aiokafka(bootstrap: str, topic: str) -> str:
    return f"""\
import asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def main() -> None:
    producer = AIOKafkaProducer(bootstrap_servers="{bootstrap}")
    await producer.start()
    await producer.send_and_wait("{topic}", b"hello")
    await producer.stop()
    consumer = AIOKafkaConsumer(
        "{topic}", bootstrap_servers="{bootstrap}", auto_offset_reset="earliest"
    )
    await consumer.start()
    print((await consumer.getone()).value)
    await consumer.stop()


asyncio.run(main())
"""


def _kcat(bootstrap: str, topic: str) -> str:
    return f"""\
kcat -b {bootstrap} -L                          # metadata
echo hello | kcat -b {bootstrap} -t {topic} -P     # produce
kcat -b {bootstrap} -t {topic} -C -o beginning -e  # consume
"""
