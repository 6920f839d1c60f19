"""A TLS client's principal: its certificate's subject DN, mapped by Kafka's rules.

Principals. With a client certificate, a connection's principal is `User:<name>` where
`<name>` is the subject's distinguished name as Java's `X500Principal.getName()` writes
it (RFC 2253: most specific RDN first, `CN=client,OU=eng,O=example,C=US`), mapped by
`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper: `DEFAULT` or
`RULE:pattern/replacement/[LU]`, first rule whose pattern matches the whole DN wins, no
match fails authentication). Without one it is `User:ANONYMOUS`.

This module reads no config and opens no socket: security/tls.py builds one
PrincipalMapper per TLS listener and calls distinguished_name on the peer's
certificate after the handshake.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..configdef import ConfigError

__all__ = ["NoMatchingRule", "PrincipalMapper", "distinguished_name"]



# Java's X500Principal.getName() (RFC 2253) writes these attribute types by keyword and
# any other by its dotted OID with the DER of the value in hex.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}


def _escape_rfc2253(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (i == 0 and ch in "# ") or (i == len(value) - 1 and ch == " "):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def _der_hex(attr: Any) -> str:
    value = attr.value if isinstance(attr.value, bytes) else str(attr.value).encode()
    tag = getattr(getattr(attr, "_type", None), "value", 12)  # UTF8String by default
    n = len(value)
    length = bytes([n]) if n < 0x80 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + \
        n.to_bytes((n.bit_length() + 7) // 8, "big")
    return "#" + (bytes([tag]) + length + value).hex()


def distinguished_name(der_certificate: bytes) -> str:
    """The subject of a DER certificate as Java's X500Principal.getName() writes it."""
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der_certificate)
    rdns = []
    for rdn in reversed(list(cert.subject.rdns)):
        parts = []
        for attr in rdn:
            keyword = _RFC2253_KEYWORDS.get(attr.oid.dotted_string)
            if keyword is None:
                parts.append(f"{attr.oid.dotted_string}={_der_hex(attr)}")
            else:
                parts.append(f"{keyword}={_escape_rfc2253(str(attr.value))}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


class NoMatchingRule(Exception):
    """No ssl.principal.mapping.rules rule matches a certificate's DN."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        result = self.pattern.sub(self.replacement, dn)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" \
            else result


# Kafka's SslPrincipalMapper.RULE_PATTERN: DEFAULT, or RULE:pattern/replacement/[LU]
# where pattern and replacement may hold backslash-escaped characters (\/ among them).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


def _java_replacement(text: str) -> str:
    """A Java Matcher.replaceAll replacement ($1 groups, \\x literals) for re.sub."""
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        if ch == "$":
            m = re.match(r"\$(\d+)|\$\{(\w+)\}", text[i:])
            if m:
                out.append(f"\\g<{m.group(1) or m.group(2)}>")
                i += m.end()
                continue
        out.append("\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)


class PrincipalMapper:
    """Kafka's SslPrincipalMapper: DN -> principal name by `ssl.principal.mapping.rules`."""

    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules

    @classmethod
    def from_rules(cls, text: str | None, key: str = "ssl.principal.mapping.rules"
                   ) -> PrincipalMapper:
        text = (text or "DEFAULT").strip()
        parsed: list[_Rule] = []
        for m in _RULE_SPLITTER.finditer(text):
            rule = m.group(1)
            if not rule:
                continue
            # Kafka's parseRules: lookingAt, then the match must have used the whole rule
            r = _RULE_PARSER.match(rule)
            if r is None or r.end() != len(rule):
                raise ConfigError(key, f"invalid rule `{rule}`", text)
            if not r.group(1) and r.group(2) is None:
                continue  # the empty alternative: nothing
            if r.group(1):
                parsed.append(_Rule(None, "", ""))
                continue
            try:
                pattern = re.compile(r.group(2))
            except re.error as e:
                raise ConfigError(key, f"invalid pattern in rule `{rule}`: {e}", text) from None
            parsed.append(_Rule(pattern, _java_replacement(r.group(3)), r.group(4)))
        if not parsed:
            raise ConfigError(key, "no rules", text)
        return cls(parsed)

    def name(self, dn: str) -> str:
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {dn}")
