"""Build of Pier's one native module; the project's metadata lives in pyproject.toml.

`brokers/records/_native.c` holds the loops over untrusted record-batch bytes (record walk, zstd
frame walk); `pip install -e .` (and a wheel build) compiles it with the C compiler Python was
built with. Each native function has a pure-Python twin the tests compare it with.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "brokers.records._native",
            sources=["brokers/records/_native.c"],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
