"""`python -m pier …`: the same entry point as the `pier` console script (`pier.cli:main`).

The launcher (`infra.stack`) starts brokers this way so it needs no installed script on PATH and
always uses the interpreter it runs under. No state of its own.

`hypothesis` is made unimportable first: kio imports it when it is installed (the `test` extra, so
in every development venv) to register test strategies, and with it pytest, trio and pygments —
18 MiB of a broker's resident memory (62 → 44 MiB at import) that no server process uses.
"""

import sys

sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # import raises ImportError

from pier.cli import main  # noqa: E402

raise SystemExit(main())
