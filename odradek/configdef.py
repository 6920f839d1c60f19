"""Config definitions: Kafka's typed key/value model, shared by broker and topic configs.

Theory of operation. Every Kafka config key has a type (ConfigType), a default, an
optional validator and a doc string. A raw value arrives as text (server.properties,
--override, CreateTopics, AlterConfigs); `ConfigDef.parse` turns it into a Python value
or raises `ConfigError` with Kafka's wording ("Invalid value 'x' for configuration k:
reason"), and `format_value` turns a Python value back into the text Kafka shows in
DescribeConfigs (ints in decimal, booleans `true`/`false`, lists comma-joined, doubles
as Java prints them). Nothing here knows which keys exist: the tables live in
odradek/config.py (broker) and odradek/topic_config.py (topic).
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308  # Java's Double.MAX_VALUE

# Java's Integer/Long.parseLong accept an optional sign and ASCII digits only; Python's
# int() would also take "1_000" and non-ASCII digits, which Kafka rejects.
_INTEGER_RE = re.compile(r"[+-]?[0-9]+\Z")


class ConfigError(Exception):
    """A config problem that must stop start-up (or reject a request) with a clear message.

    `key` names the configuration at fault; `reason` says what is wrong with it.
    """

    def __init__(self, key: str, reason: str, value: object | None = None,
                 *, message: str | None = None) -> None:
        self.key = key
        self.reason = reason
        self.value = value
        if message is None:
            if value is None:
                message = f"Invalid configuration {key}: {reason}"
            else:
                message = f"Invalid value '{value}' for configuration {key}: {reason}"
        self.message = message
        super().__init__(message)


class ConfigType(IntEnum):
    """Kafka's DescribeConfigs ConfigType codes (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigs ConfigSource codes."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class Importance(IntEnum):
    HIGH = 0
    MEDIUM = 1
    LOW = 2


class Password(str):
    """A secret value. It is a str so code can use it, but it never prints itself."""

    def __repr__(self) -> str:
        return "[hidden]"

    def reveal(self) -> str:
        return str.__str__(self)


class Validator(Protocol):
    def __call__(self, value: object) -> str | None:
        """Return None when `value` is acceptable, otherwise the reason it is not."""


@dataclass(frozen=True, slots=True)
class Range:
    """A numeric bound, inclusive at both ends; either end may be open (None)."""

    min: float | None = None
    max: float | None = None

    def __call__(self, value: object) -> str | None:
        if value is None or not isinstance(value, (int, float)):
            return None
        if self.min is not None and value < self.min:
            return f"Value must be at least {_num(self.min)}"
        if self.max is not None and value > self.max:
            return f"Value must be no more than {_num(self.max)}"
        return None

    def __str__(self) -> str:
        if self.max is None:
            return f"[{_num(self.min)},...]"
        if self.min is None:
            return f"[...,{_num(self.max)}]"
        return f"[{_num(self.min)},...,{_num(self.max)}]"


def at_least(minimum: float) -> Range:
    return Range(minimum, None)


def between(minimum: float, maximum: float) -> Range:
    return Range(minimum, maximum)


@dataclass(frozen=True, slots=True)
class OneOf:
    """The value (or, for a list, every element) must be one of `choices`."""

    choices: tuple[str, ...]
    case_sensitive: bool = True

    def __call__(self, value: object) -> str | None:
        values = value if isinstance(value, list) else [value]
        for item in values:
            if item is None:
                continue
            if not self._ok(str(item)):
                return f"String must be one of: {', '.join(self.choices)}"
        return None

    def _ok(self, item: str) -> bool:
        if self.case_sensitive:
            return item in self.choices
        return item.lower() in {c.lower() for c in self.choices}

    def __str__(self) -> str:
        return f"[{', '.join(self.choices)}]"


def one_of(*choices: str, case_sensitive: bool = True) -> OneOf:
    return OneOf(tuple(choices), case_sensitive)


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One config key: its Kafka name, type, default (as Kafka's docs give it) and rules.

    `default` is the parsed Python value (None when Kafka's default is null).
    """

    name: str
    type: ConfigType
    default: object
    doc: str
    importance: Importance = Importance.MEDIUM
    validator: Validator | None = None

    def parse(self, raw: str | None) -> object:
        """Parse text into this key's Python value; raise ConfigError naming the key."""
        if raw is None:
            return None
        value = parse_typed(self.name, self.type, raw)
        if self.validator is not None:
            reason = self.validator(value)
            if reason is not None:
                shown = "[hidden]" if self.type is ConfigType.PASSWORD else raw.strip()
                raise ConfigError(self.name, reason, shown)
        return value

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    def valid_values(self) -> str:
        """The validator as Kafka's docs print it ('[1,...]', '[compact, delete]'), or ''."""
        return "" if self.validator is None else str(self.validator)


def parse_typed(key: str, type_: ConfigType, raw: str) -> object:
    """Kafka's ConfigDef.parseType: trim, then convert by type."""
    text = raw.strip()
    if type_ is ConfigType.BOOLEAN:
        lowered = text.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise ConfigError(key, "Expected value to be either true or false", text)
    if type_ in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        low, high = {
            ConfigType.INT: (INT_MIN, INT_MAX),
            ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
            ConfigType.LONG: (LONG_MIN, LONG_MAX),
        }[type_]
        if _INTEGER_RE.match(text):
            number = int(text)
            if low <= number <= high:
                return number
        raise ConfigError(key, f"Not a number of type {type_.name}", text)
    if type_ is ConfigType.DOUBLE:
        try:
            number_f = float(text)
        except ValueError:
            raise ConfigError(key, "Not a number of type DOUBLE", text) from None
        if math.isnan(number_f) or "_" in text:
            raise ConfigError(key, "Not a number of type DOUBLE", text)
        return number_f
    if type_ is ConfigType.LIST:
        return [] if text == "" else [item.strip() for item in text.split(",")]
    if type_ is ConfigType.PASSWORD:
        return Password(text)
    # STRING and CLASS: the trimmed text (a CLASS is a Java class name we only record).
    return text


def format_value(type_: ConfigType, value: object) -> str | None:
    """The text Kafka shows for a parsed value (ConfigDef.convertToString)."""
    if value is None:
        return None
    if type_ is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if type_ is ConfigType.DOUBLE:
        assert isinstance(value, (int, float))
        return java_double(float(value))
    if type_ is ConfigType.LIST:
        assert isinstance(value, (list, tuple))
        return ",".join(str(v) for v in value)
    if type_ is ConfigType.PASSWORD:
        assert isinstance(value, str)
        return str.__str__(value)
    return str(value)


def java_double(value: float) -> str:
    """Format like Java's Double.toString: '0.5', '1.0', '1.0E7', '1.7976931348623157E308'."""
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = format(value, "f") if "e" in repr(value) else repr(value)
        return text if "." in text else text + ".0"
    # Shortest round-tripping digits (what Python's repr and Java >= 19 both choose),
    # printed as d.dddEn.
    shortest = decimal.Decimal(repr(value))
    digits = "".join(map(str, shortest.as_tuple().digits)).rstrip("0") or "0"
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{shortest.adjusted()}"


def _num(value: float | None) -> str:
    if value is None:
        return ""
    return java_double(value) if isinstance(value, float) else str(value)


def closest(name: str, candidates: Sequence[str]) -> str | None:
    """The known key a mistyped one most likely meant, for 'did you mean' hints."""
    import difflib

    matches = difflib.get_close_matches(name, candidates, n=1, cutoff=0.8)
    return matches[0] if matches else None
