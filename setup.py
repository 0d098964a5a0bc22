"""Build of Pier's native modules; the project's metadata lives in pyproject.toml.

`brokers/records/_native.c` holds the loops over untrusted record-batch bytes (record walk, zstd
frame walk); `brokers/wire/_buffers.c` allocates receive buffers without zero-filling them.
`pip install -e .` (and a wheel build) compiles them with the C compiler Python was built with.
Each native function has a pure-Python twin the tests compare it with.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "brokers.records._native",
            sources=["brokers/records/_native.c"],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "brokers.wire._buffers",
            sources=["brokers/wire/_buffers.c"],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
    ]
)
