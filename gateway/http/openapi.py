"""The tenant HTTP API's OpenAPI 3.0 document, served at `/openapi.json`.

Owns: `openapi_document(server_url)`, built from small schema helpers so each path states its
parameters, request body, success responses and Confluent's error JSON for everything else
(`default`). Schemathesis runs against it in CI (tests/e2e/gateway/test_http_openapi.py): every
answer must match it. Pure; thread-safe.
"""

from __future__ import annotations

from typing import Any

JSON = "application/json"
V2 = "application/vnd.kafka.v2+json"
NAME = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[A-Za-z0-9._-]+$"}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


def _list_of(item: str) -> dict[str, Any]:
    return _obj(
        ["kind", "metadata", "data"],
        kind={"type": "string"},
        metadata=_ref("ListMeta"),
        data={"type": "array", "items": _ref(item)},
    )


def _body(schema: dict[str, Any], media: str = JSON, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {media: {"schema": schema}}}


def _ok(schema: dict[str, Any] | None, status: str = "200", media: str = JSON) -> dict[str, Any]:
    answers: dict[str, Any] = {"default": {"$ref": "#/components/responses/Error"}}
    if schema is None:
        answers[status] = {"description": "done"}
    else:
        answers[status] = {"description": "done", "content": {media: {"schema": schema}}}
    return answers


def _path_params(*names: str) -> list[dict[str, Any]]:
    schemas = {
        "partition_id": {"type": "integer", "minimum": 0, "maximum": 100000},
    }
    return [
        {"name": n, "in": "path", "required": True, "schema": schemas.get(n, NAME)} for n in names
    ]


def _op(
    summary: str,
    params: list[dict[str, Any]],
    responses: dict[str, Any],
    body: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "parameters": params,
        "responses": responses,
        "security": [{"apiKey": []}],
    }
    if body is not None:
        op["requestBody"] = body
        op["responses"] = {**_BODY_ANSWERS, **responses}
    op.update(extra)
    return op


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": _ref("Error")}}}


# What a route that reads a body may answer about it (docs/gateway-http.md, "Request bodies").
_BODY_ANSWERS: dict[str, Any] = {
    "400": _error("the body is not what its Content-Encoding or JSON says"),
    "403": _error("not authorized for the route (the body is not read; the connection closes)"),
    "408": _error("no byte of the body for http.body.read.timeout.ms (the connection closes)"),
    "413": _error("the body, decoded, is over the route's limit"),
    "415": _error("a Content-Encoding other than identity, gzip, deflate or zstd"),
}


def _schemas() -> dict[str, Any]:
    related = _obj(["related"], related={"type": "string"})
    embedded_in = _obj(
        [],
        type={"type": "string", "enum": ["BINARY", "JSON", "STRING"]},
        data={},
    )
    header = _obj(
        ["name"], name={"type": "string"}, value=_nullable({"type": "string", "format": "byte"})
    )
    partition_ref = _obj(
        ["topic", "partition"],
        topic=NAME,
        partition={"type": "integer", "minimum": 0, "maximum": 100000},
    )
    offset_ref = _obj(
        ["topic", "partition", "offset"],
        topic=NAME,
        partition={"type": "integer", "minimum": 0, "maximum": 100000},
        offset={"type": "integer", "minimum": 0},
    )
    return {
        "Error": _obj(
            ["error_code", "message"], error_code={"type": "integer"}, message={"type": "string"}
        ),
        "ListMeta": _obj(["self"], self={"type": "string"}, next=_nullable({"type": "string"})),
        "ResourceMeta": _obj(["self"], self={"type": "string"}, resource_name={"type": "string"}),
        "Related": related,
        "Cluster": _obj(
            ["kind", "metadata", "cluster_id"],
            kind={"type": "string"},
            metadata=_ref("ResourceMeta"),
            cluster_id={"type": "string"},
            topics=related,
            consumer_groups=related,
        ),
        "ClusterList": _list_of("Cluster"),
        "Topic": _obj(
            [
                "kind",
                "metadata",
                "cluster_id",
                "topic_name",
                "is_internal",
                "replication_factor",
                "partitions_count",
            ],
            kind={"type": "string"},
            metadata=_ref("ResourceMeta"),
            cluster_id={"type": "string"},
            topic_name={"type": "string"},
            is_internal={"type": "boolean"},
            replication_factor={"type": "integer"},
            partitions_count={"type": "integer"},
            partitions=related,
            configs=related,
        ),
        "TopicList": _list_of("Topic"),
        "CreateTopic": _obj(
            ["topic_name"],
            topic_name=NAME,
            partitions_count={"type": "integer", "minimum": 1, "maximum": 50},
            replication_factor={"type": "integer", "minimum": 1, "maximum": 3},
            configs={
                "type": "array",
                "items": _obj(
                    ["name"], name={"type": "string"}, value=_nullable({"type": "string"})
                ),
            },
        ),
        "TopicConfig": _obj(
            [
                "kind",
                "metadata",
                "cluster_id",
                "topic_name",
                "name",
                "is_default",
                "is_read_only",
                "is_sensitive",
                "source",
                "synonyms",
            ],
            kind={"type": "string"},
            metadata=_ref("ResourceMeta"),
            cluster_id={"type": "string"},
            topic_name={"type": "string"},
            name={"type": "string"},
            value=_nullable({"type": "string"}),
            is_default={"type": "boolean"},
            is_read_only={"type": "boolean"},
            is_sensitive={"type": "boolean"},
            source={"type": "string"},
            synonyms={
                "type": "array",
                "items": _obj(
                    ["name", "source"],
                    name={"type": "string"},
                    value=_nullable({"type": "string"}),
                    source={"type": "string"},
                ),
            },
        ),
        "TopicConfigList": _list_of("TopicConfig"),
        "AlterConfigs": _obj(
            ["data"],
            data={
                "type": "array",
                "items": _obj(
                    ["name"],
                    name={"type": "string"},
                    value=_nullable({"type": "string"}),
                    operation={"type": "string", "enum": ["SET", "DELETE"]},
                ),
            },
        ),
        "ConfigValue": _obj(["value"], value={"type": "string"}),
        "Partition": _obj(
            ["kind", "metadata", "cluster_id", "topic_name", "partition_id"],
            kind={"type": "string"},
            metadata=_ref("ResourceMeta"),
            cluster_id={"type": "string"},
            topic_name={"type": "string"},
            partition_id={"type": "integer"},
            leader_id={"type": "integer"},
            replicas={"type": "array", "items": {"type": "integer"}},
            isr={"type": "array", "items": {"type": "integer"}},
        ),
        "PartitionList": _list_of("Partition"),
        "ProduceRecord": _obj(
            [],
            partition_id=_nullable({"type": "integer", "minimum": 0}),
            headers={"type": "array", "items": header},
            key=_nullable(embedded_in),
            value=_nullable(embedded_in),
            timestamp=_nullable({"type": "string"}),
        ),
        "ProduceResult": _obj(
            ["error_code"],
            error_code={"type": "integer"},
            message={"type": "string"},
            cluster_id={"type": "string"},
            topic_name={"type": "string"},
            partition_id={"type": "integer"},
            offset={"type": "integer"},
            timestamp={"type": "string"},
            key=_obj(["type", "size"], type={"type": "string"}, size={"type": "integer"}),
            value=_obj(["type", "size"], type={"type": "string"}, size={"type": "integer"}),
        ),
        "ConsumerGroup": _obj(
            [
                "kind",
                "metadata",
                "cluster_id",
                "consumer_group_id",
                "is_simple",
                "partition_assignor",
                "state",
            ],
            kind={"type": "string"},
            metadata=_ref("ResourceMeta"),
            cluster_id={"type": "string"},
            consumer_group_id={"type": "string"},
            is_simple={"type": "boolean"},
            partition_assignor={"type": "string"},
            state={"type": "string"},
            consumers=related,
            lag_summary=related,
        ),
        "ConsumerGroupList": _list_of("ConsumerGroup"),
        "Consumer": _obj(
            ["kind", "metadata", "cluster_id", "consumer_group_id", "consumer_id", "client_id"],
            kind={"type": "string"},
            metadata=_ref("ResourceMeta"),
            cluster_id={"type": "string"},
            consumer_group_id={"type": "string"},
            consumer_id={"type": "string"},
            instance_id=_nullable({"type": "string"}),
            client_id={"type": "string"},
        ),
        "ConsumerList": _list_of("Consumer"),
        "ConsumerLag": _obj(
            [
                "kind",
                "metadata",
                "cluster_id",
                "consumer_group_id",
                "topic_name",
                "partition_id",
                "current_offset",
                "log_end_offset",
                "lag",
            ],
            kind={"type": "string"},
            metadata=_ref("ResourceMeta"),
            cluster_id={"type": "string"},
            consumer_group_id={"type": "string"},
            topic_name={"type": "string"},
            partition_id={"type": "integer"},
            current_offset={"type": "integer"},
            log_end_offset={"type": "integer"},
            lag={"type": "integer"},
            consumer_id={"type": "string"},
            instance_id=_nullable({"type": "string"}),
            client_id={"type": "string"},
        ),
        "ConsumerLagList": _list_of("ConsumerLag"),
        "LagSummary": _obj(
            ["kind", "metadata", "cluster_id", "consumer_group_id", "max_lag", "total_lag"],
            kind={"type": "string"},
            metadata=_ref("ResourceMeta"),
            cluster_id={"type": "string"},
            consumer_group_id={"type": "string"},
            max_lag_consumer_id={"type": "string"},
            max_lag_instance_id=_nullable({"type": "string"}),
            max_lag_client_id={"type": "string"},
            max_lag_topic_name={"type": "string"},
            max_lag_partition_id={"type": "integer"},
            max_lag={"type": "integer"},
            total_lag={"type": "integer"},
        ),
        "CreateConsumer": _obj(
            [],
            name=NAME,
            format={"type": "string", "enum": ["binary", "json", "string"]},
            **{
                "auto.offset.reset": {"type": "string", "enum": ["earliest", "latest", "none"]},
                "auto.commit.enable": {"type": "string", "enum": ["true", "false"]},
                "max.poll.records": {"type": "integer", "minimum": 1, "maximum": 10000},
            },
        ),
        "ConsumerInstance": _obj(
            ["instance_id", "base_uri"], instance_id={"type": "string"}, base_uri={"type": "string"}
        ),
        "Topics": _obj(["topics"], topics={"type": "array", "minItems": 1, "items": NAME}),
        "TopicsAnswer": _obj(["topics"], topics={"type": "array", "items": {"type": "string"}}),
        "Partitions": _obj(["partitions"], partitions={"type": "array", "items": partition_ref}),
        "Offsets": _obj(["offsets"], offsets={"type": "array", "items": offset_ref}),
        "CommittedOffsets": _obj(
            ["offsets"],
            offsets={
                "type": "array",
                "items": _obj(
                    ["topic", "partition", "offset"],
                    topic={"type": "string"},
                    partition={"type": "integer"},
                    offset={"type": "integer"},
                    metadata={"type": "string"},
                ),
            },
        ),
        "ConsumerRecord": _obj(
            ["topic", "partition", "offset", "key", "value"],
            topic={"type": "string"},
            partition={"type": "integer"},
            offset={"type": "integer"},
            timestamp={"type": "integer"},
            key={"nullable": True},
            value={"nullable": True},
            headers={"type": "array", "items": header},
        ),
    }


def _billing_schemas() -> dict[str, Any]:
    """A tenant's usage rows and invoices (gateway/http/usage.py), as `tenancy.billing_store`
    writes them: measures are integers except `storage_byte_ms`, an exact decimal string; money
    is a decimal string."""
    count = {"type": "integer", "minimum": 0}
    decimal = {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?$"}
    text = {"type": "string"}
    measures = ("bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms")
    usage = {
        "hour": {"type": "string", "format": "date-time"},
        "tenant": text,
        "principal": text,
        "client_id": text,
        "topic": _nullable(text),
        **dict.fromkeys((*measures, "partition_ms", "records"), count),
        "storage_byte_ms": decimal,
    }
    summary = {
        "id": text,
        "period": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"},
        "status": {"type": "string", "enum": ["draft", "final"]},
        "currency": text,
        "total": decimal,
    }
    line = _obj(
        ["kind", "for_period", "dimension", "measure", "quantity", "amount"],
        kind={"type": "string", "enum": ["usage", "adjustment"]},
        for_period=text,
        dimension=text,
        measure=decimal,
        quantity=decimal,
        amount=decimal,
    )
    return {
        "UsageRow": _obj(list(usage), **usage),
        "UsageList": _obj(
            ["kind", "items"], kind=text, items={"type": "array", "items": _ref("UsageRow")}
        ),
        "InvoiceSummary": _obj(list(summary), **summary),
        "InvoiceList": _obj(
            ["kind", "items"], kind=text, items={"type": "array", "items": _ref("InvoiceSummary")}
        ),
        "InvoiceLine": line,
        "Invoice": _obj(
            ["id", "tenant", "period", "status", "plan", "currency", "lines", "total"],
            **summary,
            tenant=text,
            plan=text,
            lines={"type": "array", "items": _ref("InvoiceLine")},
            provenance={"type": "object"},
            finalized_at=_nullable(text),
        ),
    }


def _billing_paths(c: str, pc: list[dict[str, Any]]) -> dict[str, Any]:
    """The tenant's own usage and invoices; another tenant's cluster id answers 404."""

    def query(name: str, schema: dict[str, Any], required: bool, about: str) -> dict[str, Any]:
        return {
            "name": name,
            "in": "query",
            "required": required,
            "description": about,
            "schema": schema,
        }

    window = [
        query(
            "from", {"type": "string", "format": "date-time"}, True, "start (RFC 3339, inclusive)"
        ),
        query(
            "to",
            {"type": "string", "format": "date-time"},
            True,
            "end (RFC 3339, exclusive): after 'from', at most 62 days later",
        ),
        query(
            "granularity",
            {"type": "string", "enum": ["hour", "day"]},
            False,
            "rows per UTC hour (default) or summed per UTC day",
        ),
        query("topic", {"type": "string", "maxLength": 255}, False, "one topic's rows only"),
    ]
    invoice_id = {
        "name": "invoice_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "minLength": 1, "maxLength": 64},
    }
    return {
        c + "/usage": {
            "get": _op(
                "The tenant's usage by UTC hour or day, oldest first (400: a bad window)",
                [*pc, *window],
                _ok(_ref("UsageList")),
            )
        },
        c + "/invoices": {
            "get": _op("The tenant's invoices, oldest period first", pc, _ok(_ref("InvoiceList")))
        },
        c + "/invoices/{invoice_id}": {
            "get": _op(
                "One of the tenant's invoices, with its lines",
                [*pc, invoice_id],
                _ok(_ref("Invoice")),
            )
        },
    }


def openapi_document(server_url: str) -> dict[str, Any]:
    c = "/v3/clusters/{cluster_id}"
    t = c + "/topics/{topic_name}"
    g = c + "/consumer-groups/{consumer_group_id}"
    i = "/consumers/{group_name}/instances/{instance}"
    pc, pt, pg = (
        _path_params("cluster_id"),
        _path_params("cluster_id", "topic_name"),
        _path_params("cluster_id", "consumer_group_id"),
    )
    pi = _path_params("group_name", "instance")
    records_query = [
        {
            "name": "timeout",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 0, "maximum": 2000},
        },
        {
            "name": "max_bytes",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": 67108864},
        },
        {
            "name": "max_records",
            "in": "query",
            "required": False,
            "description": "at most this many records (default: the instance's max.poll.records)",
            "schema": {"type": "integer", "minimum": 1, "maximum": 10000},
        },
    ]

    def v2(schema: dict[str, Any], status: str = "200") -> dict[str, Any]:
        return _ok(schema, status, V2)

    paths: dict[str, Any] = {
        "/v3/clusters": {"get": _op("The tenant's cluster", [], _ok(_ref("ClusterList")))},
        c: {"get": _op("The tenant's cluster", pc, _ok(_ref("Cluster")))},
        c + "/topics": {
            "get": _op("List topics", pc, _ok(_ref("TopicList"))),
            "post": _op(
                "Create a topic", pc, _ok(_ref("Topic"), "201"), _body(_ref("CreateTopic"))
            ),
        },
        t: {
            "get": _op("Describe a topic", pt, _ok(_ref("Topic"))),
            "delete": _op("Delete a topic", pt, _ok(None, "204")),
        },
        t + "/configs": {"get": _op("List a topic's configs", pt, _ok(_ref("TopicConfigList")))},
        t + "/configs:alter": {
            "post": _op(
                "Set or reset several configs", pt, _ok(None, "204"), _body(_ref("AlterConfigs"))
            )
        },
        t + "/configs/{name}": {
            "get": _op("One config", [*pt, *_path_params("name")], _ok(_ref("TopicConfig"))),
            "put": _op(
                "Set one config",
                [*pt, *_path_params("name")],
                _ok(None, "204"),
                _body(_ref("ConfigValue")),
            ),
            "delete": _op("Reset one config", [*pt, *_path_params("name")], _ok(None, "204")),
        },
        t + "/partitions": {"get": _op("List partitions", pt, _ok(_ref("PartitionList")))},
        t + "/partitions/{partition_id}": {
            "get": _op(
                "One partition", [*pt, *_path_params("partition_id")], _ok(_ref("Partition"))
            )
        },
        t + "/records": {
            "post": _op(
                "Produce one record, or a stream of records (one result line each)",
                pt,
                _ok(_ref("ProduceResult")),
                _body(_ref("ProduceRecord")),
            )
        },
        c + "/consumer-groups": {
            "get": _op("List consumer groups", pc, _ok(_ref("ConsumerGroupList")))
        },
        g: {"get": _op("Describe a consumer group", pg, _ok(_ref("ConsumerGroup")))},
        g + "/consumers": {"get": _op("A group's consumers", pg, _ok(_ref("ConsumerList")))},
        g + "/lag-summary": {"get": _op("A group's lag summary", pg, _ok(_ref("LagSummary")))},
        g + "/lags": {"get": _op("A group's lag per partition", pg, _ok(_ref("ConsumerLagList")))},
        "/consumers/{group_name}": {
            "post": _op(
                "Create a consumer instance",
                _path_params("group_name"),
                v2(_ref("ConsumerInstance")),
                _body(_ref("CreateConsumer"), V2, required=False),
            )
        },
        i: {"delete": _op("Delete a consumer instance", pi, _ok(None, "204"))},
        i + "/subscription": {
            "post": _op("Subscribe", pi, _ok(None, "204"), _body(_ref("Topics"), V2)),
            "get": _op("The subscription", pi, v2(_ref("TopicsAnswer"))),
            "delete": _op("Unsubscribe", pi, _ok(None, "204")),
        },
        i + "/assignments": {
            "post": _op("Assign partitions", pi, _ok(None, "204"), _body(_ref("Partitions"), V2)),
            "get": _op("The assignment", pi, v2(_ref("Partitions"))),
        },
        i + "/offsets": {
            "post": _op(
                "Commit offsets (last consumed), or the positions",
                pi,
                _ok(None, "204"),
                _body(_ref("Offsets"), V2, required=False),
            ),
            "get": _op(
                "Committed offsets",
                pi,
                v2(_ref("CommittedOffsets")),
                _body(_ref("Partitions"), V2, required=False),
            ),
        },
        i + "/positions": {"post": _op("Seek", pi, _ok(None, "204"), _body(_ref("Offsets"), V2))},
        i + "/positions/beginning": {
            "post": _op(
                "Seek to the beginning", pi, _ok(None, "204"), _body(_ref("Partitions"), V2)
            )
        },
        i + "/positions/end": {
            "post": _op("Seek to the end", pi, _ok(None, "204"), _body(_ref("Partitions"), V2))
        },
        i + "/records": {
            "get": _op(
                "Long-poll records",
                [*pi, *records_query],
                {
                    "default": {"$ref": "#/components/responses/Error"},
                    "200": {
                        "description": "records",
                        "content": {
                            f"application/vnd.kafka.{fmt}.v2+json": {
                                "schema": {"type": "array", "items": _ref("ConsumerRecord")}
                            }
                            for fmt in ("binary", "json", "string")
                        },
                    },
                },
            )
        },
        **_billing_paths(c, pc),
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Pier tenant HTTP API",
            "version": "1.0.0",
            "description": "Confluent REST v3 (admin, produce) and v2 (consumers) for one tenant. "
            "Authenticate with HTTP Basic: API key id as user, secret as password.",
        },
        "servers": [{"url": server_url}],
        "paths": paths,
        "components": {
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "basic"}},
            "responses": {
                "Error": {
                    "description": "Confluent's error JSON: error_code is the status or a finer code",
                    "content": {JSON: {"schema": _ref("Error")}},
                }
            },
            "schemas": {**_schemas(), **_billing_schemas()},
        },
    }
