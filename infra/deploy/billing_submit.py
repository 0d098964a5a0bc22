"""Entry point for `spark-submit`: `pier billing run` under the master spark-submit was given.

    spark-submit --master spark://HOST:7077 infra/deploy/billing_submit.py \\
        --db postgresql+psycopg://... --bootstrap broker1:9092,broker2:9092

Every argument is passed to `pier billing run`; `--master` is fixed to `existing`.
"""

from __future__ import annotations

import sys

from pier.cli import main

if __name__ == "__main__":
    sys.exit(main(["billing", "run", *sys.argv[1:], "--master", "existing"]))
