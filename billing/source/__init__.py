"""`__usage` for the rollup: `usage` reads it with Spark's Kafka source and checks each record
against the usage contract in the JVM; `kafka` resolves offsets with the project's client (driver
side); `offsets` is the JSON form of offsets the ledger stores. Only `usage` imports PySpark.
"""
