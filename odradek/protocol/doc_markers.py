"""Tables in the docs generated from the code: the text between two marker
lines of a doc is the code's rendering, rewritten by a script or compared by
its --check mode (scripts/api_acl_table.py, scripts/api_version_table.py) and
by a unit test, so the doc cannot drift from the code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def replace_between(doc: str, begin: str, end: str, body: str) -> str:
    """`doc` with the text between the `begin` and `end` lines replaced by `body`."""
    head, sep, rest = doc.partition(begin)
    if not sep or end not in rest:
        raise ValueError(f"the doc lacks the markers {begin!r} ... {end!r}")
    _old, _, tail = rest.partition(end)
    return f"{head}{begin}\n{body}{end}{tail}"


def write_or_check(doc: Path, replace_in: Callable[[str], str], argv: list[str],
                   script: str) -> int:
    """A generating script's main: rewrite `doc`, or with --check exit 1 when it
    differs from what the code renders."""
    current = doc.read_text()
    wanted = replace_in(current)
    if "--check" in argv:
        if current != wanted:
            print(f"{doc} differs from the code: run {script}")
            return 1
        return 0
    doc.write_text(wanted)
    return 0
