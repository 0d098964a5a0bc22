"""The `pier-usage` Spark data source over `__usage` (see `billing.source.datasource`).

`register(spark)` makes `spark.read.format("pier-usage")` available in a session. Importing this
package imports PySpark; the pure parts (`offsets`, `rows`, `kafka`) do not need it.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    from billing.source.datasource import UsageDataSource

    spark.dataSource.register(UsageDataSource)
