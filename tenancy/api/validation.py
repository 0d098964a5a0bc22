"""Request validation against the OpenAPI document: parameters, media type and JSON bodies.

Owns: finding the document's operation for a matched aiohttp route, coercing path/query/header
parameters to their schema types, and validating JSON bodies with `jsonschema` (Draft 2020-12,
the dialect of OpenAPI 3.1). Chosen over openapi-core: a small validator over our own document
needs no request/response adapters for aiohttp and reports failing fields in our format.
Handlers read `request[PARAMS]` (coerced values by name) and `request[BODY]` (parsed JSON).
The validator is immutable after construction; the middleware runs on the event loop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tenancy.api.errors import (
    FieldProblem,
    MalformedBodyError,
    RequestValidationError,
    UnsupportedMediaTypeError,
)

PARAMS: web.RequestKey[dict[str, Any]] = web.RequestKey("pier.params")
BODY: web.RequestKey[Any] = web.RequestKey("pier.body")
_DOC_URI = "urn:pier:admin-api"
_INTEGER = re.compile(r"^-?[0-9]{1,19}$")


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    location: str  # path | query | header
    required: bool
    is_integer: bool  # query strings are coerced before validation
    validator: Draft202012Validator


@dataclass(frozen=True, slots=True)
class Operation:
    operation_id: str
    parameters: tuple[Parameter, ...]
    body: Draft202012Validator | None


class RequestValidator:
    """Validators for every operation of one OpenAPI document, by (method, path template)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        resource = Resource.from_contents(dict(document), default_specification=DRAFT202012)
        self._registry: Registry[Any] = Registry().with_resource(_DOC_URI, resource)
        self._document = document
        self._operations: dict[tuple[str, str], Operation] = {}
        for path, item in document["paths"].items():
            for method, spec in item.items():
                self._operations[(method.upper(), path)] = self._operation(spec)

    def operation(self, method: str, path_template: str) -> Operation | None:
        return self._operations.get((method.upper(), path_template))

    def _validator(self, schema: Mapping[str, Any]) -> Draft202012Validator:
        return Draft202012Validator({"$id": "urn:pier:check", **schema}, registry=self._registry)

    def _resolve(self, node: Mapping[str, Any]) -> Mapping[str, Any]:
        pointer = node.get("$ref")
        if pointer is None:
            return node
        target: Any = self._document
        for part in pointer.removeprefix("#/").split("/"):
            target = target[part]
        return dict(target)

    def _operation(self, spec: Mapping[str, Any]) -> Operation:
        parameters = []
        for raw in spec.get("parameters", []):
            param = self._resolve(raw)
            schema = _with_doc_refs(param["schema"])
            parameters.append(
                Parameter(
                    name=param["name"],
                    location=param["in"],
                    required=bool(param.get("required")),
                    is_integer=schema.get("type") == "integer",
                    validator=self._validator(schema),
                )
            )
        body = None
        if "requestBody" in spec:
            schema = spec["requestBody"]["content"]["application/json"]["schema"]
            body = self._validator(_with_doc_refs(schema))
        return Operation(spec["operationId"], tuple(parameters), body)


def _with_doc_refs(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Point a top-level local `$ref` at the document resource (nested refs resolve there)."""
    pointer = schema.get("$ref")
    if isinstance(pointer, str) and pointer.startswith("#"):
        return {**schema, "$ref": f"{_DOC_URI}{pointer}"}
    return dict(schema)


def coerce_parameters(
    operation: Operation,
    path: Mapping[str, str],
    query: Mapping[str, str],
    headers: Mapping[str, str],
) -> dict[str, Any]:
    """Typed parameter values by name; RequestValidationError lists every failing one."""
    sources = {"path": path, "query": query, "header": headers}
    values: dict[str, Any] = {}
    problems: list[FieldProblem] = []
    for param in operation.parameters:
        raw = sources[param.location].get(param.name)
        where = f"{param.location}.{param.name}"
        if raw is None:
            if param.required:
                problems.append(FieldProblem(where, "is required"))
            continue
        value: Any = raw
        if param.is_integer:
            if not _INTEGER.match(raw):
                problems.append(FieldProblem(where, "must be an integer"))
                continue
            value = int(raw)
        problems.extend(_problems(param.validator.iter_errors(value), where))
        values[param.name] = value
    known = {param.name for param in operation.parameters if param.location == "query"}
    # Unknown query parameters are refused, so a misspelt filter (`?stauts=`) is not ignored.
    problems += [
        FieldProblem(f"query.{name}", "unknown parameter") for name in query if name not in known
    ]
    if problems:
        raise RequestValidationError(problems)
    return values


def validate_body(operation: Operation, body: Any) -> None:
    if operation.body is not None:
        problems = _problems(operation.body.iter_errors(body), "body")
        if problems:
            raise RequestValidationError(problems)


def _problems(errors: Iterable[SchemaError], root: str) -> list[FieldProblem]:
    found = []
    for error in sorted(errors, key=lambda e: list(map(str, e.absolute_path))):
        parts = [root, *map(str, error.absolute_path)]
        if error.validator == "required" and isinstance(error.instance, dict):
            required: list[str] = list(error.validator_value)  # type: ignore[arg-type]
            missing = [name for name in required if name not in error.instance]
            parts += missing[:1]
            found.append(FieldProblem(".".join(parts), "is required"))
            continue
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
            parts += [name for name in error.instance if name not in known][:1]
        found.append(FieldProblem(".".join(parts), _short(error)))
    return found


_TYPE_NAMES = {
    "integer": "a whole number",
    "number": "a number",
    "string": "a string",
    "object": "an object",
    "array": "an array",
    "boolean": "true or false",
    "null": "null",
}
_FORMATS = {"date-time": "an RFC 3339 timestamp such as 2026-01-31T00:00:00Z"}


def _short(error: SchemaError) -> str:
    """The whole message for one failing field, saying what would be accepted."""
    kind, expected = error.validator, error.validator_value
    if kind == "additionalProperties":
        known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        return f"unknown property; the properties are {', '.join(known) or 'none'}"
    if kind == "enum" and isinstance(expected, list):
        return f"must be one of {', '.join(map(str, expected))}"
    if kind == "type":
        types = expected if isinstance(expected, list) else [expected]
        return "must be " + " or ".join(_TYPE_NAMES.get(str(t), str(t)) for t in types)
    if kind == "pattern":
        return f"must match the pattern {expected}"
    if kind == "format":
        return f"must be {_FORMATS.get(str(expected), f'a {expected} value')}"
    limits = {
        "minimum": "must be at least {}",
        "maximum": "must be at most {}",
        "exclusiveMinimum": "must be greater than {}",
        "minLength": "must have at least {} characters",
        "maxLength": "must have at most {} characters",
        "minItems": "must have at least {} items",
        "maxItems": "must have at most {} items",
        "maxProperties": "must have at most {} entries",
    }
    if kind in limits:
        return limits[str(kind)].format(expected)
    return error.message


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise MalformedBodyError(f"the body is not valid JSON: {exc}") from None


def is_json(content_type: str) -> bool:
    return content_type == "application/json" or content_type.endswith("+json")


def validation_middleware(validator: RequestValidator) -> Middleware:
    """Validate parameters and bodies of every routed request before its handler runs."""

    @web.middleware
    async def validate(request: web.Request, handler: Handler) -> web.StreamResponse:
        route = request.match_info.route
        template = route.resource.canonical if route.resource is not None else None
        method = "GET" if request.method == "HEAD" else request.method  # aiohttp serves HEAD too
        operation = validator.operation(method, template) if template else None
        if operation is None:
            return await handler(request)  # aiohttp's 404/405 (the problem middleware maps them)
        query = {key: request.query.getone(key) for key in request.query}
        request[PARAMS] = coerce_parameters(operation, request.match_info, query, request.headers)
        if operation.body is not None:
            request[BODY] = await _read_body(request, operation)
        return await handler(request)

    return validate


async def _read_body(request: web.Request, operation: Operation) -> Any:
    if not is_json(request.content_type):
        raise UnsupportedMediaTypeError(f"expected application/json, got {request.content_type}")
    body = parse_json(await request.read())
    validate_body(operation, body)
    return body
