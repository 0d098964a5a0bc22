"""The JSON-lines fast path of `JsonSplitter.feed_values` (gateway.http.bodies): whatever the
body and however it is cut into chunks, the values, their sizes, the trailing whitespace and the
errors are those of the scan (`feed`, then each value decoded)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from gateway.http.bodies import MAX_DEPTH, JsonSplitter, _decoded
from gateway.http.errors import ApiError

BODIES = [
    b'{"value":{"type":"JSON","data":1}}\n{"key":{"type":"STRING","data":"k"}}\n',
    b'  {"a":1}  \r\n\n\t{"b":[1,2,{"c":"}{"}]}\n',
    b'{"a":1}{"b":2}\n{"c":3} {"d":4}\n',  # several on a line
    b'{"a":\n 1}\n{"b":\n[2]}\n',  # values over several lines
    b'1 "two" [3]\n{"four":4}\nnull true\n',  # scalars
    b'{"a":1}\n{"b":2}',  # the last line without its newline
    b'{"s":"\\n\\"{["}\n[]\n{}\n',
    b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"\n",  # too deep
    b'{"a":1}\n{"b":}\n',  # bad JSON on the second line
    b'{"a":"\xff"}\n',  # not UTF-8
    b'{"a":1}\n' + b'{"b":2}\n' * 50 + b"   \n\n",
    # Lines the whole-chunk decode (orjson) must hand back to the per-line path:
    b'{"a":1}\n{"a":1},{"b":2}\n{"c":3}\n',  # two objects joined by a comma on one line
    b'{"a":1}\n{"n":NaN}\n{"i":Infinity}\n',  # Python's json takes these, orjson does not
    b'{"a":1}\n{"big":123456789012345678901234567890}\n',  # beyond 64 bits
    b'{"a":1}\n{"s":"\\ud800"}\n',  # a lone surrogate escape
    b'{"a":1}\n' + b'{"d":' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}\n",  # too deep
    b'{"a":1}\n{"b":2}\r\n{"c":3}\n',  # a CR before a newline
    b'{"a":1}\n{"a":1,"a":2}\n',  # a repeated key: the last one wins
]


def _outcome(body: bytes, cuts: list[int], fast: bool) -> list[Any]:
    splitter = JsonSplitter(1 << 20)
    seen: list[Any] = []
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    try:
        for piece in pieces:
            if fast:
                seen += splitter.feed_values(piece)
            else:
                seen += [(_decoded(value), size) for value, size in splitter.feed(piece)]
        seen += [(_decoded(value), size) for value, size in splitter.finish()]
        seen.append(("blanks", splitter.blanks))
    except ApiError as exc:
        seen.append(("error", exc.status))
    return [json.dumps(item, sort_keys=True) for item in seen]


@pytest.mark.parametrize("body", BODIES)
def test_json_lines_split_as_the_scan_splits_them(body: bytes) -> None:
    rng = random.Random(len(body))
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(body)), min(3, len(body) - 1)))
        assert _outcome(body, cuts, fast=True) == _outcome(body, cuts, fast=False)
    assert _outcome(body, [], fast=True) == _outcome(body, [], fast=False)


def test_each_value_counts_the_whitespace_before_it() -> None:
    splitter = JsonSplitter(1 << 20)
    done = splitter.feed_values(b'{"a":1}\n {"b":2}\n')
    assert done == [({"a": 1}, 7), ({"b": 2}, 9)]
    assert splitter.blanks == 1
