"""CRC32C (Castagnoli) over record batches, in C (the `crc32c` package uses SSE4.2 where present).

Owns: `crc32c(data)`. Thread-safe.
"""

from __future__ import annotations

import crc32c as _crc32c
from typing_extensions import Buffer


def crc32c(data: Buffer) -> int:
    return int(_crc32c.crc32c(data))
