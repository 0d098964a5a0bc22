"""A newcomer's first hour (issue 12): a fresh virtualenv gets a working `pier --version`, on PATH
once the venv is activated (the README's command); the set-up installs the Kafka clients the
README's examples import; every script a user runs answers `--help` with its usage, exit 0, and
starts or installs nothing.

The fresh venv is made without pip (seconds) and Pier is installed into it by the project venv's
pip (`pip --python`) as `pip install .` installs it (build isolation, the build backend from PyPI
or pip's cache, the native module compiled), but without dependencies: those are PyPI's, and downloading them
all would take minutes, so after the install a `.pth` line lends the fresh venv the project venv's
site-packages (after its own, so its `pier` metadata and entry point are the fresh ones). Plans, quota units and paths are checked against a real admin API in
`tests/integration/tenancy_api/test_cli.py` (`test_first_hour_*`).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
HELP_BOUND_S = 30.0  # generous for a loaded 2-core machine; `--help` does no work
BENCHES = ["admin_api", "billing", "cleaner", "cluster", "credentials", "gateway", "groups"]
BENCHES += ["produce_consume"]
MODULE_TO_DIST = {"confluent_kafka": "confluent-kafka", "kafka": "kafka-python"}
MODULE_TO_DIST["aiokafka"] = "aiokafka"


def project_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def run(
    argv: list[str], timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def test_a_fresh_venv_has_pier_version_and_on_path_once_activated(tmp_path: Path) -> None:
    venv = tmp_path / "fresh"
    made = run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=60)
    assert made.returncode == 0, made.stderr
    install = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
    # Not editable: an editable build copies the native module into the work tree, over the file
    # other processes of this test session may have mapped.
    install += ["--quiet", "--disable-pip-version-check", "--no-deps", str(REPO)]
    installed = run(install, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    deps = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    (site / "site-packages" / "zz-project-dependencies.pth").write_text(deps + "\n")
    shown = run([str(venv / "bin" / "pier"), "--version"], timeout=30)
    assert (shown.returncode, shown.stdout, shown.stderr) == (0, f"pier {project_version()}\n", "")
    # The README: `source .venv/bin/activate` puts `pier` on PATH.
    activated = run(
        ["bash", "-c", f"source {venv}/bin/activate && command -v pier && pier --version"],
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")},
    )
    assert activated.returncode == 0, activated.stderr
    assert activated.stdout == f"{venv}/bin/pier\npier {project_version()}\n"


def test_the_project_venv_answers_version() -> None:
    shown = run([str(Path(sys.executable).with_name("pier")), "--version"], timeout=30)
    assert (shown.returncode, shown.stdout) == (0, f"pier {project_version()}\n")


def _readme_python_imports() -> set[str]:
    """What the README's and the client cookbook's Python examples import."""
    pages = (REPO / "README.md").read_text() + (REPO / "docs" / "clients.md").read_text()
    modules: set[str] = set()
    for block in re.findall(r"```python\n(.*?)```", pages, re.S):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
    return modules


def test_the_set_up_installs_every_client_the_readme_uses() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    clients = {re.split(r"[<>=\[ ]", spec)[0] for spec in extras["clients"]}
    third_party = {m for m in _readme_python_imports() if m not in sys.stdlib_module_names}
    ours = {"infra", "pier", "brokers", "tenancy", "gateway", "billing"}
    needed = {MODULE_TO_DIST.get(m, m) for m in third_party - ours}
    assert needed and needed <= clients, f"README imports {needed}, `clients` has {clients}"
    up = (REPO / "infra" / "up").read_text()
    assert 'pier_venv "[clients]"' in up  # the set-up command installs them
    assert "optional+=(kcat)" in (REPO / "infra" / "lib.sh").read_text()  # and kcat


def _help_commands() -> list[list[str]]:
    python = sys.executable
    commands = [
        ["infra/up", "--help"],
        ["infra/test", "--help"],
        ["infra/test", "-h"],
        ["bash", ".ci/run", "--help"],
        [python, "-m", "infra.up_main", "--help"],
        [python, "infra/deploy/billing_submit.py", "--help"],
        [str(Path(python).with_name("pier")), "--help"],
    ]
    commands += [[python, "-m", f"infra.bench.{name}", "--help"] for name in BENCHES]
    # README form for the benchmarks it runs by path
    commands += [[python, f"infra/bench/{name}.py", "--help"] for name in ("cleaner", "groups")]
    return commands


@pytest.mark.parametrize("argv", _help_commands(), ids=lambda argv: " ".join(argv[-3:]))
def test_every_script_answers_help_without_doing_work(argv: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "PIER_VENV": os.environ.get("PIER_VENV", str(REPO / ".venv"))}
    started = time.monotonic()
    answered = run(argv, timeout=HELP_BOUND_S * 2, env=env)
    took = time.monotonic() - started
    assert answered.returncode == 0, answered.stderr[-2000:]
    assert "usage" in answered.stdout.lower(), answered.stdout[:500]
    assert took < HELP_BOUND_S, f"{' '.join(argv)} took {took:.1f} s for --help"
    for work in ("==> ", "infra: pip install", "infra: creating", "infra: installing"):
        assert work not in answered.stderr + answered.stdout, f"--help did work: {work}"


def test_up_help_installs_nothing_without_a_venv(tmp_path: Path) -> None:
    venv = tmp_path / "no-venv-yet"
    answered = run(["infra/up", "--help"], timeout=60, env={**os.environ, "PIER_VENV": str(venv)})
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.startswith("infra/up: set Pier up")
    assert "Usage: infra/up" in answered.stdout
    assert not venv.exists()
