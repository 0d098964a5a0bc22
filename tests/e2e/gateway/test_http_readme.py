"""The README's curl examples for tenants run as written (issue 15, acceptance).

The `sh` blocks of the README's "For tenants" section are extracted in order and run by bash
(`set -euo pipefail`; every curl uses `--fail-with-body`, so any refused request fails the run)
against a real gateway and broker, with `PIER_HTTP`, `PIER_KEY` and `PIER_SECRET` set for a
tenant (the block that only exports them is skipped). The output must show the topic, the three
produced records, the records read back and the group's lag summary.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.gateway.http_stack import http_gateway_stack, http_url, wait_http
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e
README = Path(__file__).resolve().parents[3] / "README.md"


def tenant_examples() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## For tenants\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    return [b for b in blocks if "curl" in b]


def json_values(text: str) -> list[object]:
    """The JSON values curl printed back to back (answers carry no trailing newline)."""
    decoder = json.JSONDecoder()
    values: list[object] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return values
        value, position = decoder.raw_decode(text, position)
        values.append(value)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("http-readme"))) as running:
        wait_http(running)
        yield running


def test_the_readme_curl_examples_run_as_written(stack: GatewayStack) -> None:
    blocks = tenant_examples()
    assert len(blocks) >= 2, "the README lost its tenant curl examples"
    creds = stack.credentials["acme"]
    env = {
        **os.environ,
        "PIER_HTTP": http_url(stack),
        "PIER_KEY": creds.key_id,
        "PIER_SECRET": creds.secret,
    }
    script = "set -euo pipefail\n" + "\necho\n".join(blocks)
    run = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
    documents = json_values(run.stdout)
    topic = next(d for d in documents if isinstance(d, dict) and d.get("kind") == "KafkaTopic")
    assert topic["topic_name"] == "orders" and topic["partitions_count"] == 3
    produced = [d for d in documents if isinstance(d, dict) and d.get("error_code") == 200]
    assert len(produced) == 3 and produced[1]["partition_id"] == 0
    records = next(d for d in documents if isinstance(d, list))
    assert len(records) == 3
    assert {"name": "trace", "value": "YWJj"} in [h for r in records for h in r["headers"]]
    summary = next(
        d
        for d in documents
        if isinstance(d, dict) and d.get("kind") == "KafkaConsumerGroupLagSummary"
    )
    assert summary["consumer_group_id"] == "billing" and summary["total_lag"] == 0
