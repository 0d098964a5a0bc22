"""Files `infra/up` writes for the developer: secrets readable by their owner only, and paths
shown as short as they can be. Blocking; safe from any thread (no shared state).
"""

from __future__ import annotations

import os
from pathlib import Path


def save_secret(path: Path, text: str) -> None:
    """Write `text` to `path`, readable and writable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as secret:
        # O_CREAT's mode applies to new files only; an old file may have been readable by others.
        os.fchmod(descriptor, 0o600)
        secret.write(text + "\n")


def shown(path: Path) -> str:
    """`path` relative to the working directory when inside it (shorter to copy), else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
