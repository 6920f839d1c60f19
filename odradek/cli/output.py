"""How listings are printed: Kafka's tools' text tables, or JSON for scripts.

Every listing command takes `-o/--format text|json`. With json, the listing is one
JSON document on stdout: a list of objects whose keys are the text table's column
names in snake case (`CURRENT-OFFSET` -> `current_offset`, `TransactionalId` ->
`transactional_id`), or the structure documented in the command's --help; values
keep their types (numbers stay numbers, a missing value is null). Errors still go
to stderr as one line, with exit code 1.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

FORMATS = ("text", "json")


def add_format_argument(parser: argparse.ArgumentParser | Any) -> None:
    parser.add_argument("-o", "--format", choices=FORMATS, default="text",
                        help="text (as Kafka's tools print it) or json (one document on "
                             "stdout, for scripts); default: %(default)s")


def is_json(args: argparse.Namespace) -> bool:
    return getattr(args, "format", "text") == "json"


def column_key(name: str) -> str:
    """A table header as a JSON key: `CURRENT-OFFSET` -> `current_offset`,
    `COORDINATOR (ID)` -> `coordinator_id`, `#MEMBERS` -> `members`,
    `TransactionalId` -> `transactional_id`."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"[^a-z0-9]+", "_", spaced.lower()).strip("_")


def records(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> list[dict[str, Any]]:
    keys = [column_key(h) for h in header]
    return [dict(zip(keys, row)) for row in rows]


def print_json(document: Any) -> None:
    json.dump(document, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def text_table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """Columns padded to their widest cell; a missing value (None) shows as `-`."""
    cells = [list(header)] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def print_table(args: argparse.Namespace, rows: Sequence[Sequence[Any]],
                header: Sequence[str]) -> None:
    if is_json(args):
        print_json(records(rows, header))
    else:
        print(text_table(rows, header))
