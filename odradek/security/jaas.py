"""Kafka's `sasl.jaas.config` values: one JAAS login module entry.

Kafka writes them as

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret";

that is: a login module class name, a control flag (required, requisite,
sufficient, optional), options `key=value` with the value a word or a quoted
string (double or single quotes, backslash escapes the next character), and
a closing `;`. Comments (`/* ... */`, `//` to the end of a line) are skipped,
as Java's StreamTokenizer, which Kafka's JaasConfig uses, skips them. Kafka
allows one login module per `sasl.jaas.config`, and so does this parser.

Errors name what was expected and where (a character offset), never an
option's value: the value may be a password.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

FLAGS = ("required", "requisite", "sufficient", "optional")

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

# A word: what StreamTokenizer reads as one (class names, option keys, unquoted values).
_WORD = re.compile(r"[A-Za-z0-9_.$\-+/:@*]+")


class JaasError(ValueError):
    """A sasl.jaas.config value that does not parse; says what and where."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str
    options: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def users(self) -> dict[str, str]:
        """PlainLoginModule's `user_<name>="<password>"` options, by user name."""
        return {k[len("user_"):]: v for k, v in self.options.items()
                if k.startswith("user_") and len(k) > len("user_")}

    def __repr__(self) -> str:  # options hold passwords: never print their values
        return f"JaasEntry({self.login_module} {self.flag} options={sorted(self.options)})"


def parse_jaas_config(text: str) -> JaasEntry:
    """Parse one `sasl.jaas.config` value; raises JaasError."""
    tokens = _tokens(text)
    pos = 0

    def take(what: str) -> tuple[str, str, int]:
        nonlocal pos
        if pos >= len(tokens):
            raise JaasError(f"expected {what}, found the end of the value")
        tok = tokens[pos]
        pos += 1
        return tok

    kind, module, at = take("a login module class name")
    if kind != "word":
        raise JaasError(f"expected a login module class name at offset {at}")
    kind, flag, at = take("a control flag (required, requisite, sufficient, optional)")
    if kind != "word" or flag.lower() not in FLAGS:
        raise JaasError(f"expected a control flag (required, requisite, sufficient or "
                        f"optional) after {module} at offset {at}")
    options: dict[str, str] = {}
    while True:
        kind, key, at = take("an option key=value or ';'")
        if kind == ";":
            break
        if kind != "word":
            raise JaasError(f"expected an option name or ';' at offset {at}")
        kind, _, at = take(f"'=' after option {key}")
        if kind != "=":
            raise JaasError(f"expected '=' after option {key} at offset {at}")
        kind, value, at = take(f"a value for option {key}")
        if kind not in ("word", "quoted"):
            raise JaasError(f"expected a value for option {key} at offset {at}")
        if key in options:
            raise JaasError(f"option {key} is given twice")
        options[key] = value
    if pos != len(tokens):
        raise JaasError(f"only one login module is allowed in sasl.jaas.config; found more "
                        f"at offset {tokens[pos][2]}")
    return JaasEntry(module, flag.lower(), MappingProxyType(options))


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, offset) with kind 'word', 'quoted', '=' or ';'."""
    out: list[tuple[str, str, int]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasError(f"unterminated comment at offset {i}")
            i = end + 2
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif ch in "=;":
            out.append((ch, ch, i))
            i += 1
        elif ch in "\"'":
            start, i, chars = i, i + 1, []
            while True:
                if i >= n:
                    raise JaasError(f"unterminated quoted value starting at offset {start}")
                c = text[i]
                if c == ch:
                    i += 1
                    break
                if c == "\\" and i + 1 < n:
                    i += 1
                    c = text[i]
                chars.append(c)
                i += 1
            out.append(("quoted", "".join(chars), start))
        else:
            m = _WORD.match(text, i)
            if m is None:
                raise JaasError(f"unexpected character {ch!r} at offset {i}")
            out.append(("word", m.group(), i))
            i = m.end()
    return out
