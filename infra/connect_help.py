"""Copy-paste snippets that show a developer how to reach the local stack: each Kafka client, and
the operators' admin API with `curl` and `pier admin`.

Pure text built from the real addresses and paths; no I/O. Kept apart from `up_main` so the gateway
(SASL credentials) can add its own section later.
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


def admin_snippets(url: str, token_file: str, pier: str = "pier") -> str:
    """How to call the admin API with curl and `pier admin`, the operator token read from a file."""
    admin = f"{pier} admin --url {url}"
    return f"""\
--- admin API ---
curl {url}/healthz
curl -H "Authorization: Bearer $(cat {token_file})" {url}/v1/tenants
export PIER_ADMIN_TOKEN="$(cat {token_file})"   # read by `pier admin`
{admin} tenants create --display-name Acme --plan free
{admin} tenants list
{admin} service-accounts create TENANT_ID --name app
{admin} api-keys create TENANT_ID --service-account SERVICE_ACCOUNT_ID
"""


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
