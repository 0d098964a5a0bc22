"""`pier billing` turns failures into one line and a non-zero exit status (no Spark started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from billing.rollup import job
from billing.rollup.ledger import FencedError
from pier.cli import main

pytestmark = pytest.mark.unit


def _run(tmp_path: Path, *extra: str) -> list[str]:
    (tmp_path / "t.db").touch()  # billing refuses a SQLite URL naming no file
    return [
        "billing",
        "run",
        "--db",
        f"sqlite:///{tmp_path / 't.db'}",
        "--bootstrap",
        "h:1",
        *extra,
    ]


def test_the_losing_concurrent_run_exits_1_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def lose(*args: Any, **kwargs: Any) -> Any:
        raise FencedError(
            "another billing run committed __usage offsets first; nothing was written"
        )

    monkeypatch.setattr(job, "run_rollup", lose)
    monkeypatch.setattr("billing.spark.spark_session", lambda *a, **k: None)
    assert main(_run(tmp_path)) == 1
    err = capsys.readouterr().err
    assert (
        err
        == "pier: error: another billing run committed __usage offsets first; nothing was written\n"
    )


def test_a_spark_failure_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Job aborted\n\tat org.apache.spark.Something(...)\n")

    monkeypatch.setattr(job, "run_rollup", crash)
    monkeypatch.setattr("billing.spark.spark_session", lambda *a, **k: None)
    assert main(_run(tmp_path)) == 1
    assert capsys.readouterr().err == "pier: error: billing run failed: RuntimeError: Job aborted\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["billing", "run", "--bootstrap", "h:1"], "--db (or PIER_DB) is required"),
        (
            ["billing", "run", "--db", "sqlite:///x.db", "--sample-interval", "1y"],
            "--sample-interval",
        ),
        (
            ["billing", "invoice", "--db", "sqlite:///x.db", "--period", "2026-1", "--grace", "3w"],
            "--grace",
        ),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("PIER_DB", raising=False)
    monkeypatch.setenv("PIER_BOOTSTRAP", "h:1")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pier: error: ") and message in err and err.count("\n") == 1
