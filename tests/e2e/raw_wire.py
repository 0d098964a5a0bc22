"""A raw-socket Kafka connection for feeding the broker exact bytes, valid or not.

Owns: framing (int32 size prefix), encoding requests with kio's writers (`entity_writer`, header
v1/v2 chosen by the message's own `__header_schema__`), decoding responses with kio's readers, and
telling "the broker closed the connection" apart from "the broker is silent". Blocking sockets
with timeouts; one `RawConnection` belongs to one thread.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.serial import entity_reader, entity_writer

CLIENT_ID = "pier-e2e-raw"
_SIZE = struct.Struct(">i")


def encode_entity(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def request_bytes(request: Any, correlation_id: int, client_id: str | None = CLIENT_ID) -> bytes:
    """Header (v1 or v2, as the request's schema says) + body, without the size prefix."""
    header_cls = request.__header_schema__
    header = header_cls(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return encode_entity(header) + encode_entity(request)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def decode_response(response_cls: Any, payload: bytes) -> tuple[int, Any]:
    """(correlation id, response entity) from a response frame's payload."""
    header, header_size = entity_reader(response_cls.__header_schema__)(payload, 0)
    body, _size = entity_reader(response_cls)(payload, header_size)
    return header.correlation_id, body


class RawConnection:
    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._next_correlation_id = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def correlation_id(self) -> int:
        self._next_correlation_id += 1
        return self._next_correlation_id

    def read_frame(self, timeout: float = 10.0) -> bytes:
        """The payload of the next response frame; ConnectionError if the broker closed."""
        self.sock.settimeout(timeout)
        (size,) = _SIZE.unpack(self._read_exactly(4))
        assert 0 <= size < 64 * 1024 * 1024, f"implausible response size {size}"
        return self._read_exactly(size)

    def call(self, request: Any, response_cls: Any, timeout: float = 10.0) -> Any:
        """Send a kio request and return the decoded response, checking the correlation id."""
        correlation_id = self.correlation_id()
        self.send(frame(request_bytes(request, correlation_id)))
        answered_id, response = decode_response(response_cls, self.read_frame(timeout))
        assert answered_id == correlation_id
        return response

    def api_versions(self) -> Any:
        request = ApiVersionsRequest(client_software_name="pier-e2e", client_software_version="1.0")
        response = self.call(request, ApiVersionsResponse)
        assert response.error_code == 0, f"ApiVersions error {response.error_code}"
        return response

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes this connection within `timeout` (responses are drained)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if not self.sock.recv(65536):
                    return True
            except (ConnectionResetError, BrokenPipeError):
                return True
            except TimeoutError:
                return False
        return False

    def _read_exactly(self, count: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < count:
            chunk = self.sock.recv(count - len(chunks))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks += chunk
        return bytes(chunks)
