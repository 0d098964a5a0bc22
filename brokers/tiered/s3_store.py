"""The S3-compatible remote store (any server speaking the S3 API: AWS S3, MinIO, moto's server).

Owns: object keys `<topic>-<partition>/<start offset>-<segment id>.<suffix>` in one bucket (the
local store's layout), uploads with boto3's managed transfer (multipart for big segments), ranged
GETs for reads (`Range: bytes=start-end`), deletes of every suffix. A copy that finds no bucket
(a fresh or reset server) creates it and copies again. Every boto3/botocore failure
(connection refused, timeout, 5xx, missing object) becomes RemoteStorageError; the client retries
twice with short timeouts so a dead server fails a call within seconds, not minutes. The secret key
is never logged. Blocking; thread-safe (boto3 clients are).
"""

from __future__ import annotations

from typing import Any

from brokers.tiered.config import S3Settings
from brokers.tiered.segment_metadata import RemoteSegment
from brokers.tiered.store import IndexKind, PacedReader, RemoteStorageError, SegmentFiles

_SUFFIXES = ("log", *(kind.value for kind in IndexKind))
CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 3, 30


class S3Store:
    def __init__(self, settings: S3Settings) -> None:
        import boto3  # type: ignore[import-untyped]  # the `s3` extra: only S3 brokers need it
        from botocore.config import Config  # type: ignore[import-untyped]

        self.bucket = settings.bucket
        self._errors = _error_types()
        self._client: Any = boto3.client(
            "s3",
            endpoint_url=settings.endpoint,
            region_name=settings.region,
            aws_access_key_id=settings.access_key,
            aws_secret_access_key=settings.secret_key,
            config=Config(
                connect_timeout=CONNECT_TIMEOUT_S,
                read_timeout=READ_TIMEOUT_S,
                retries={"max_attempts": 2, "mode": "standard"},
            ),
        )

    def _key(self, segment: RemoteSegment, suffix: str) -> str:
        return f"{segment.object_name}.{suffix}"

    def copy_segment(self, segment: RemoteSegment, files: SegmentFiles) -> None:
        try:
            self._copy(segment, files)
        except self._errors as exc:
            if _error_code(exc) != "NoSuchBucket":
                raise RemoteStorageError(f"copy of {segment.object_name} failed: {exc}") from exc
        else:
            return
        self.ensure_bucket()  # a server that lost (or never had) the bucket: create it, copy again
        try:
            self._copy(segment, files)
        except self._errors as exc:
            raise RemoteStorageError(f"copy of {segment.object_name} failed: {exc}") from exc

    def _copy(self, segment: RemoteSegment, files: SegmentFiles) -> None:
        for suffix, source in files.objects():
            key = self._key(segment, suffix)
            if isinstance(source, bytes):
                self._client.put_object(Bucket=self.bucket, Key=key, Body=source)
            else:
                with open(source, "rb") as data:
                    reader = PacedReader(data, files.max_bytes_per_second)
                    self._client.upload_fileobj(reader, self.bucket, key)

    def fetch_segment(self, segment: RemoteSegment, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        try:
            answer = self._client.get_object(
                Bucket=self.bucket, Key=self._key(segment, "log"), Range=f"bytes={start}-{end - 1}"
            )
            return bytes(answer["Body"].read())
        except self._errors as exc:
            raise RemoteStorageError(f"read of {segment.object_name} failed: {exc}") from exc

    def fetch_index(self, segment: RemoteSegment, kind: IndexKind) -> bytes:
        try:
            answer = self._client.get_object(Bucket=self.bucket, Key=self._key(segment, kind.value))
            return bytes(answer["Body"].read())
        except self._errors as exc:
            raise RemoteStorageError(f"read of {segment.object_name} failed: {exc}") from exc

    def delete_segment(self, segment: RemoteSegment) -> None:
        keys = [{"Key": self._key(segment, suffix)} for suffix in _SUFFIXES]
        try:
            answer = self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})
        except self._errors as exc:
            raise RemoteStorageError(f"delete of {segment.object_name} failed: {exc}") from exc
        if answer.get("Errors"):
            raise RemoteStorageError(f"delete of {segment.object_name} failed: {answer['Errors']}")

    def ensure_bucket(self) -> None:
        """Create the bucket when it does not exist (first start against a fresh server)."""
        try:
            self._client.head_bucket(Bucket=self.bucket)
            return
        except self._errors:
            pass
        try:
            self._client.create_bucket(Bucket=self.bucket)
        except self._errors as exc:
            raise RemoteStorageError(f"bucket {self.bucket} cannot be created: {exc}") from exc

    def close(self) -> None:
        self._client.close()


def _error_code(exc: Exception) -> str:
    """The S3 error code of a botocore ClientError ("" for anything else)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return "NoSuchBucket" if "NoSuchBucket" in str(exc) else ""  # boto3's S3UploadFailedError


def _error_types() -> tuple[type[Exception], ...]:
    from boto3.exceptions import Boto3Error  # type: ignore[import-untyped]
    from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

    return (BotoCoreError, ClientError, Boto3Error, OSError)
