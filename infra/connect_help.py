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
    """How to call the admin API with curl and `pier admin`, the operator token read from a file;
    runs as pasted (bash, with jq): a tenant, a service account, its API key and an ACL."""
    admin = f"{pier} admin --url {url}"
    return f"""\
--- admin API ---
curl -s --fail-with-body {url}/healthz
curl -s --fail-with-body -H "Authorization: Bearer $(cat {token_file})" {url}/v1/tenants
export PIER_ADMIN_TOKEN="$(cat {token_file})"   # read by `pier admin`
{admin} tenants list
TENANT=$({admin} tenants create --display-name Acme --plan free --json | jq -r .id)
ACCOUNT=$({admin} service-accounts create "$TENANT" --name app --json | jq -r .id)
{admin} api-keys create "$TENANT" --service-account "$ACCOUNT"   # the secret is shown once
{admin} acls create "$TENANT" --principal "User:$ACCOUNT" --resource-type TOPIC \\
    --pattern-type literal --resource-name '*' --operation ALL --permission allow
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
print(consumer.poll(30).value())
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
kcat -b {bootstrap} -t {topic} -C -o beginning -e -q  # consume
"""


def sasl_snippets(bootstrap: str, credentials_file: str, java_properties: str) -> str:
    """How a tenant connects through the gateway with each client, with SCRAM-SHA-256 (PLAIN and
    SCRAM-SHA-512 work too, with the mechanism changed; SCRAM never sends the secret itself, so
    kafka-python and aiokafka do not warn about a password sent in the clear). Each Python
    snippet reads the key from the credentials file itself (the secret is never printed) and runs
    as pasted."""
    load = (
        f'creds = json.load(open("{credentials_file}"))  # key_id = username, secret = password\n'
    )
    sections = [
        ("confluent-kafka (SASL)", _confluent_sasl(bootstrap, load)),
        ("kafka-python (SASL)", _kafka_python_sasl(bootstrap, load)),
        ("aiokafka (SASL)", _aiokafka_sasl(bootstrap, load)),
        ("kcat (SASL)", _kcat_sasl(bootstrap, credentials_file)),
        ("Java client / Kafka tools", _java(bootstrap, java_properties)),
    ]
    return "\n".join(f"--- {name} ---\n{body}" for name, body in sections)


def java_client_properties(bootstrap: str, credentials: dict[str, str]) -> str:
    """A client.properties for the Java client and Kafka's command-line tools."""
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{credentials["key_id"]}" password="{credentials["secret"]}";'
    )
    return (
        f"bootstrap.servers={bootstrap}\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.jaas.config={jaas}"
    )


def _confluent_sasl(bootstrap: str, load: str) -> str:
    return f"""\
import json

from confluent_kafka import Consumer, Producer

{load}config = {{
    "bootstrap.servers": "{bootstrap}",
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-256",  # or SCRAM-SHA-512 / PLAIN
    "sasl.username": creds["key_id"],
    "sasl.password": creds["secret"],
}}
producer = Producer(config)
producer.produce("{DEMO_TOPIC}", b"hello")
producer.flush()
consumer = Consumer({{**config, "group.id": "demo", "auto.offset.reset": "earliest"}})
consumer.subscribe(["{DEMO_TOPIC}"])
print(consumer.poll(30).value())
consumer.close()
"""


def _kafka_python_sasl(bootstrap: str, load: str) -> str:
    return f"""\
import json
import logging

from kafka import KafkaConsumer, KafkaProducer

# kafka-python warns about any SASL without TLS; SCRAM sends a proof, never the secret.
logging.getLogger("kafka.net.sasl.scram").setLevel(logging.ERROR)
{load}sasl = dict(
    bootstrap_servers="{bootstrap}",
    security_protocol="SASL_PLAINTEXT",
    sasl_mechanism="SCRAM-SHA-256",
    sasl_plain_username=creds["key_id"],
    sasl_plain_password=creds["secret"],
)
KafkaProducer(**sasl).send("{DEMO_TOPIC}", b"hello").get(timeout=10)
for message in KafkaConsumer("{DEMO_TOPIC}", auto_offset_reset="earliest", consumer_timeout_ms=5000, **sasl):
    print(message.value)
"""


def _aiokafka_sasl(bootstrap: str, load: str) -> str:
    return f"""\
import asyncio
import json

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

{load}sasl = dict(
    bootstrap_servers="{bootstrap}",
    security_protocol="SASL_PLAINTEXT",
    sasl_mechanism="SCRAM-SHA-256",
    sasl_plain_username=creds["key_id"],
    sasl_plain_password=creds["secret"],
)


async def main() -> None:
    producer = AIOKafkaProducer(**sasl)
    await producer.start()
    await producer.send_and_wait("{DEMO_TOPIC}", b"hello")
    await producer.stop()
    consumer = AIOKafkaConsumer("{DEMO_TOPIC}", auto_offset_reset="earliest", **sasl)
    await consumer.start()
    print((await consumer.getone()).value)
    await consumer.stop()


asyncio.run(main())
"""


def _kcat_sasl(bootstrap: str, credentials_file: str) -> str:
    return f"""\
KEY=$(python3 -c 'import json; print(json.load(open("{credentials_file}"))["key_id"])')
SECRET=$(python3 -c 'import json; print(json.load(open("{credentials_file}"))["secret"])')
SASL="-X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=SCRAM-SHA-256 -X sasl.username=$KEY -X sasl.password=$SECRET"
kcat -b {bootstrap} $SASL -L                          # metadata: only the tenant's topics
echo hello | kcat -b {bootstrap} $SASL -t {DEMO_TOPIC} -P     # produce
kcat -b {bootstrap} $SASL -t {DEMO_TOPIC} -C -o beginning -e -q  # consume
"""


def _java(bootstrap: str, java_properties: str) -> str:
    return f"""\
# {java_properties} holds bootstrap.servers, SASL_PLAINTEXT, SCRAM-SHA-256 and the JAAS line (0600)
kafka-topics.sh --bootstrap-server {bootstrap} --command-config {java_properties} --list
kafka-console-producer.sh --bootstrap-server {bootstrap} --producer.config {java_properties} --topic {DEMO_TOPIC}
"""
