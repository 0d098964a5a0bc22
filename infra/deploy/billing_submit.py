"""Entry point for `spark-submit` from a checkout: `pier billing run` (or `stream`) under the
master spark-submit was given.

    spark-submit --master spark://HOST:7077 --jars "$JARS" infra/deploy/billing_submit.py \\
        [stream] --db postgresql+psycopg://... --bootstrap broker1:9092,broker2:9092 --state DIR

The other arguments are passed to `pier billing run` (or `pier billing stream` when the first is
`stream`); `--master` is fixed to `existing`. An installed `pier` needs no checkout: submit its
`pier/__main__.py` with `billing run|stream ... --master existing` (infra/deploy/billing.md).
"""

from __future__ import annotations

import sys

from pier.cli import main

if __name__ == "__main__":
    arguments = sys.argv[1:]
    command = arguments.pop(0) if arguments[:1] in (["run"], ["stream"]) else "run"
    sys.exit(main(["billing", command, *arguments, "--master", "existing"]))
