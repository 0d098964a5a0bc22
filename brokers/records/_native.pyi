# Stubs of the C extension compiled from _native.c (see setup.py); twins in record_walk.py and
# zstd_frames.py.
from typing_extensions import Buffer

def walk_records(
    payload: Buffer,
    count: int,
    base_timestamp: int,
    ts_low: int,
    ts_high: int,
    flags: int,
    release_gil: bool,
    /,
) -> tuple[int, int, int, int, int, int, int]: ...
def zstd_frames(
    data: Buffer, /
) -> tuple[list[tuple[int, int, int, int | None]], int, int, int]: ...
