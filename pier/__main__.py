"""`python -m pier …`: the same entry point as the `pier` console script (`pier.cli:main`).

The launcher (`infra.stack`) starts brokers this way so it needs no installed script on PATH and
always uses the interpreter it runs under. No state of its own.
"""

from pier.cli import main

raise SystemExit(main())
