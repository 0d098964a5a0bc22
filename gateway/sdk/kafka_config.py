"""Ready Kafka client configurations for a tenant's API key: `kafka_config`.

Owns the SASL settings each client spells its own way: confluent-kafka (librdkafka names, a
dict for `Producer`/`Consumer`/`AdminClient`), kafka-python and aiokafka (keyword arguments for
their constructors), and the Java client (properties text for `--command-config` or
`Properties.load`). Pure; thread-safe.

Example::

    from confluent_kafka import Producer
    from gateway.sdk import kafka_config

    producer = Producer(kafka_config("gateway.example:9092", "KEYID", "SECRET"))
    consumer_kwargs = kafka_config("gateway.example:9092", "KEYID", "SECRET", client="aiokafka")
"""

from __future__ import annotations

from typing import Any, Literal, overload

Client = Literal["confluent-kafka", "kafka-python", "aiokafka", "java"]
CLIENTS: tuple[str, ...] = ("confluent-kafka", "kafka-python", "aiokafka", "java")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _java_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


@overload
def kafka_config(
    endpoint: str,
    key: str,
    secret: str,
    *,
    client: Literal["java"],
    mechanism: str = ...,
    tls: bool = ...,
    ca_file: str | None = ...,
) -> str: ...


@overload
def kafka_config(
    endpoint: str,
    key: str,
    secret: str,
    *,
    client: Literal["confluent-kafka", "kafka-python", "aiokafka"] = ...,
    mechanism: str = ...,
    tls: bool = ...,
    ca_file: str | None = ...,
) -> dict[str, Any]: ...


def kafka_config(
    endpoint: str,
    key: str,
    secret: str,
    *,
    client: Client = "confluent-kafka",
    mechanism: str = "PLAIN",
    tls: bool = False,
    ca_file: str | None = None,
) -> dict[str, Any] | str:
    """Settings for `client` to reach the gateway at `endpoint` (host:port) with an API key.

    `mechanism` is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; `tls` selects SASL_SSL (with
    `ca_file` to trust the gateway's certificate)."""
    if client not in CLIENTS:
        raise ValueError(f"client must be one of {', '.join(CLIENTS)}")
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {', '.join(MECHANISMS)}")
    protocol = "SASL_SSL" if tls else "SASL_PLAINTEXT"
    if client == "confluent-kafka":
        config: dict[str, Any] = {
            "bootstrap.servers": endpoint,
            "security.protocol": protocol,
            "sasl.mechanism": mechanism,
            "sasl.username": key,
            "sasl.password": secret,
        }
        if ca_file:
            config["ssl.ca.location"] = ca_file
        return config
    if client in ("kafka-python", "aiokafka"):
        config = {
            "bootstrap_servers": endpoint,
            "security_protocol": protocol,
            "sasl_mechanism": mechanism,
            "sasl_plain_username": key,
            "sasl_plain_password": secret,
        }
        if tls:
            import ssl

            config["ssl_context"] = ssl.create_default_context(cafile=ca_file)
        return config
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    lines = [
        f"bootstrap.servers={endpoint}",
        f"security.protocol={protocol}",
        f"sasl.mechanism={mechanism}",
        f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
        f'username="{_java_quote(key)}" password="{_java_quote(secret)}";',
    ]
    if ca_file:
        lines += [f"ssl.truststore.location={ca_file}", "ssl.truststore.type=PEM"]
    return "\n".join(lines) + "\n"
