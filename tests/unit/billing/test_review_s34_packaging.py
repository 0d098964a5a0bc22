"""Review of session 34's usage scan (billing/source/scan.py): the package as built carries what
the scan needs at run time.

`scan._jar_path` digests `UsageScan.java` beside the module (to find the jar, in `spark_session`,
and to build it, in `python -m infra.spark_jars fetch`), and infra/deploy/billing.md installs the
driver with `pip install 'pier[billing]'`: a built package (setuptools' real `build_py`, as a
wheel build runs it, on a copy of the project's metadata and `billing/`) must hold the source.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def test_a_built_package_carries_the_usage_scan_source(tmp_path: Path) -> None:
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(
        ROOT / "billing", tmp_path / "billing", ignore=shutil.ignore_patterns("__pycache__")
    )
    built = tmp_path / "built"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import setuptools; setuptools.setup()",
            "-q",
            "build_py",
            "-d",
            str(built),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (built / "billing" / "source" / "scan.py").is_file()  # the build did run
    assert (built / "billing" / "source" / "UsageScan.java").is_file()
