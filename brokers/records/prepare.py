"""Turning a produce request's records into what the leader appends: validated, re-encoded.

Owns: `prepare_append(data, policy, inline=...) -> PreparedAppend`, the one pass over untrusted
batches before a leader append (and `prepare_own_append`, its shortcut for batches the broker
built itself: the configuration's limits only): the header rules and CRC (`validate`), decompression within the
caps, the per-record walk (`record_walk`, native), then one of
- re-encoding under the topic's `compression.type` when it is not `producer` and differs from the
  batch's codec (Kafka's LogValidator rebuild): the records' bytes are the same under every codec,
  so this is decompress + compress, never a decode. The result must fit max.message.bytes or the
  batch is refused (RecordTooLargeError: Kafka re-checks sizes after re-compression); to
  `uncompressed` that is known from the decompressed size, so a bomb stops after ~1 MiB, and
  compression stops as soon as its output passes the limit;
- rewriting a CreateTime batch's maxTimestamp to its records' real maximum when they differ
  (Kafka's setMaxTimestamp: the time index and retention must not trust the producer);
- nothing: the request's bytes are appended as they are (the usual case).

Cost and where it runs: `inline=True` is the event loop's fast path. It takes uncompressed
batches up to INLINE_RECORDS_BYTES and compressed ones up to INLINE_COMPRESSED_BYTES that
decompress to at most INLINE_DECOMPRESSED_BYTES (in at most INLINE_SNAPPY_BLOCKS xerial blocks),
without re-encoding — about a millisecond at worst — and raises NeedsWorker for anything
heavier, before its CRC is even computed when the sizes in the header tell. Called with
`inline=False` (a worker thread) the work is bounded by the caps in the policy: at most
`max_decompressed_bytes` decompressed plus `max.message.bytes` compressed in memory, and the
codecs and the native walk release the GIL. Pure functions; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing_extensions import Buffer

from brokers.records.batch import HEADER_SIZE, BatchHeader, iter_headers
from brokers.records.builder import reseal
from brokers.records.compression import CODEC_NAMES, NONE, compress, decompress
from brokers.records.errors import DecodeBudgetError, DecompressedSizeError, RecordTooLargeError
from brokers.records.record_walk import check_records
from brokers.records.validate import AppendPolicy, Batches, check_headers, split_batches

INLINE_RECORDS_BYTES = 1024 * 1024
INLINE_COMPRESSED_BYTES = 16 * 1024
INLINE_DECOMPRESSED_BYTES = 256 * 1024
INLINE_SNAPPY_BLOCKS = 16  # xerial blocks (32 KiB of records each, as clients write them)


class NeedsWorker(Exception):
    """Raised by an inline `prepare_append` whose work would hold the event loop too long."""


@dataclass(slots=True)  # not frozen: one per partition appended, built 6x faster
class PreparedAppend:
    """What the log appends: `data` (the request's bytes, or rebuilt ones) and its batches."""

    data: Buffer
    batches: Batches


def prepare_append(data: Buffer, policy: AppendPolicy, *, inline: bool = False) -> PreparedAppend:
    """Validate `data` (one partition's records) under `policy`; see the module docstring."""
    view = memoryview(data)
    batches = split_batches(view, policy.origin_client)
    if inline:
        for _, header in batches:
            if _heavy(header, policy):
                raise NeedsWorker
    check_headers(view, batches, policy)
    rebuilt: list[bytes | None] | None = None  # made on the first batch rebuilt (seldom)
    for i, (pos, header) in enumerate(batches):
        batch = _prepare_batch(view[pos : pos + header.size], header, policy, inline)
        if batch is not None:
            if rebuilt is None:
                rebuilt = [None] * len(batches)
            rebuilt[i] = batch
    if rebuilt is None:
        return PreparedAppend(data, batches)
    out = b"".join(
        view[pos : pos + header.size] if batch is None else batch
        for (pos, header), batch in zip(batches, rebuilt, strict=True)
    )
    return PreparedAppend(out, list(iter_headers(out)))


def prepare_own_append(data: Buffer, policy: AppendPolicy) -> PreparedAppend:
    """`prepare_append` for batches this broker built itself (a coordinator's records, written
    with `brokers.records.builder` on the event loop): their CRC, record encoding, offset deltas
    and keys are right by construction, so only what the topic's configuration can refuse is
    checked here — each batch within `max.message.bytes` and `pier.batch.max.records`, uncompressed
    under a `producer` codec, CreateTime with one timestamp for all its records (base = max: the
    coordinators stamp a batch with their clock) in the topic's window. A batch failing any of
    these goes through `prepare_append`, which refuses or rebuilds it as for any other append.
    One coordinator write costs a header parse instead of a CRC and a record walk: OffsetCommits
    are a third of OMB's requests."""
    view = memoryview(data)
    batches = split_batches(view, policy.origin_client)
    for _, header in batches:
        if not _stands(header, policy):
            return prepare_append(data, policy)
    return PreparedAppend(data, batches)


def _stands(header: BatchHeader, policy: AppendPolicy) -> bool:
    if header.size > policy.max_message_bytes or header.records_count > policy.max_records:
        return False
    if header.compression != NONE or _recodes(header, policy):
        return False
    if policy.log_append_time or header.is_log_append_time:
        return False
    stamp, now = header.max_timestamp, policy.now_ms  # `policy.window`'s bounds, unclamped
    if header.base_timestamp != stamp:
        return False
    return now - policy.timestamp_before_max_ms <= stamp <= now + policy.timestamp_after_max_ms


def _heavy(header: BatchHeader, policy: AppendPolicy) -> bool:
    if _recodes(header, policy):
        return True
    body = header.size - HEADER_SIZE
    if header.compression == NONE:
        return body > INLINE_RECORDS_BYTES
    return body > INLINE_COMPRESSED_BYTES


def _recodes(header: BatchHeader, policy: AppendPolicy) -> bool:
    return policy.target_codec is not None and policy.target_codec != header.compression


def _prepare_batch(
    batch: memoryview, header: BatchHeader, policy: AppendPolicy, inline: bool
) -> bytes | None:
    """The batch rebuilt, or None when the request's bytes stand as they are."""
    body = batch[HEADER_SIZE:]
    payload = _payload(header, body, policy, inline)
    window = policy.window(header)
    max_timestamp = check_records(
        payload,
        header.records_count,
        header.base_timestamp,
        window=window,
        requires_keys=policy.requires_keys,
        release_gil=not inline,
    )
    if header.records_count > policy.max_records:
        raise RecordTooLargeError(
            f"batch of {header.records_count} records exceeds pier.batch.max.records "
            f"{policy.max_records}"
        )
    if window is None:
        max_timestamp = header.max_timestamp  # LogAppendTime: the log sets it
    target = policy.target_codec
    if target is not None and target != header.compression:
        return _recode(header, payload, target, max_timestamp, policy)
    if max_timestamp != header.max_timestamp:
        return reseal(header, body, compression=header.compression, max_timestamp=max_timestamp)
    return None


def _payload(header: BatchHeader, body: memoryview, policy: AppendPolicy, inline: bool) -> Buffer:
    """The batch's records, decompressed within the tightest of the caps that apply."""
    if header.compression == NONE:
        return body
    cap = policy.max_decompressed_bytes
    recode_limit = max(policy.max_message_bytes - HEADER_SIZE, 0)
    to_none = _recodes(header, policy) and policy.target_codec == NONE
    limit = min(cap, INLINE_DECOMPRESSED_BYTES if inline else cap)
    budget_blocks = INLINE_SNAPPY_BLOCKS if inline else None
    if to_none:
        limit = min(limit, recode_limit)
    try:
        return decompress(header.compression, body, limit, max_blocks=budget_blocks)
    except DecodeBudgetError as exc:
        raise NeedsWorker from exc
    except DecompressedSizeError as exc:
        if to_none and limit == recode_limit:
            raise RecordTooLargeError(
                f"batch re-encoded uncompressed exceeds max.message.bytes "
                f"{policy.max_message_bytes}"
            ) from exc
        if limit < cap:
            raise NeedsWorker from exc
        raise DecompressedSizeError(
            f"{CODEC_NAMES[header.compression]} batch decompresses beyond "
            f"pier.batch.max.decompressed.bytes {cap}"
        ) from exc


def _recode(
    header: BatchHeader, payload: Buffer, codec: int, max_timestamp: int, policy: AppendPolicy
) -> bytes:
    room = max(policy.max_message_bytes - HEADER_SIZE, 0)
    try:
        packed = compress(codec, payload, policy.compression_level, max_size=room)
    except RecordTooLargeError as exc:
        raise RecordTooLargeError(
            f"batch re-encoded as {CODEC_NAMES[codec]} exceeds max.message.bytes "
            f"{policy.max_message_bytes}"
        ) from exc
    return reseal(header, packed, compression=codec, max_timestamp=max_timestamp)
