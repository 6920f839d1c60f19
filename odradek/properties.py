"""Java .properties text and `--override key=value` pairs, read the way Kafka reads them.

`parse_properties` follows java.util.Properties.load, because Kafka reads
server.properties with it; `parse_overrides` turns the CLI's `--override` strings into
the same `dict[str, str]`. Both produce text only: typing and validating the values is
BrokerConfig's job (odradek/config.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from odradek.configdef import ConfigError

__all__ = ["parse_overrides", "parse_properties"]


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text the way java.util.Properties.load does.

    Kafka reads server.properties with Properties.load, so odradek accepts the same
    syntax: `#`/`!` comment lines, `key=value`, `key: value` or `key value`, logical lines
    continued by an odd number of trailing backslashes (the next line's leading blanks
    dropped), and escapes (\\t \\n \\r \\f \\uXXXX, backslash before any other character
    keeps that character). Later keys win. Unlike Java (ISO-8859-1), callers decode files
    as UTF-8.
    """
    result: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_key_value(logical)
        result[_unescape(key)] = _unescape(value)
    return result


_BLANKS = " \t\f"


def _logical_lines(text: str) -> Iterator[str]:
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue  # comment lines never continue, even when they end in a backslash
        parts: list[str] = []
        while _continues(line):
            parts.append(line[:-1])
            if i >= len(lines):
                line = ""
                break
            line = lines[i].lstrip(_BLANKS)
            i += 1
        parts.append(line)
        yield "".join(parts)


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _BLANKS:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _BLANKS:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _BLANKS:
            j += 1
    return key, line[j:]


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            code = text[i + 2:i + 6]
            if len(code) != 4 or not all(c in "0123456789abcdefABCDEF" for c in code):
                raise ConfigError("(properties)", f"Malformed \\uxxxx encoding: \\u{code}",
                                  message=f"Malformed \\uxxxx encoding in properties: "
                                          f"\\u{code}")
            out.append(chr(int(code, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)



def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """`key=value` strings (from --override) to a dict; the value may contain '='."""
    result: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError("--override", f"'{item}' is not key=value",
                              message=f"Invalid override '{item}': expected key=value, "
                                      "e.g. --override num.partitions=3")
        result[key] = value.strip()
    return result
