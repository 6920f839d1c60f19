"""The sasl.jaas.config parser: Kafka's syntax, and errors that never echo a secret."""

from __future__ import annotations

import pytest

from odradek.security.jaas import JaasError, parse_jaas_config

KAFKA_PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="admin" password="admin-secret" user_admin="admin-secret" '
               'user_alice="alice-secret";')


def test_parses_kafkas_plain_example() -> None:
    entry = parse_jaas_config(KAFKA_PLAIN)
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.flag == "required"
    assert entry.options["username"] == "admin"
    assert entry.options["password"] == "admin-secret"
    assert entry.users() == {"admin": "admin-secret", "alice": "alice-secret"}


def test_quotes_escapes_comments_and_unquoted_words() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.scram.ScramLoginModule  Required\n"
        "  /* the broker's own login */ username=broker // a comment\n"
        "  password='p\\'a\"s;s=w\\\\d' tokenauth=true ;")
    assert entry.flag == "required"
    assert dict(entry.options) == {"username": "broker", "password": "p'a\"s;s=w\\d",
                                   "tokenauth": "true"}


@pytest.mark.parametrize(("text", "says"), [
    ("", "login module"),
    ("org.Foo", "control flag"),
    ("org.Foo mandatory;", "control flag"),
    ('org.Foo required username="a"', "end of the value"),
    ('org.Foo required username "a";', "'='"),
    ('org.Foo required username=;', "value for option username"),
    ('org.Foo required password="never-shown', "unterminated quoted value"),
    ('org.Foo required a="1" a="2";', "given twice"),
    ('org.Foo required; org.Bar required;', "only one login module"),
    ('org.Foo required a=1 /* open', "unterminated comment"),
    ('org.Foo required a=1 ! ;', "unexpected character"),
])
def test_errors_say_what_was_expected(text: str, says: str) -> None:
    with pytest.raises(JaasError, match=says) as e:
        parse_jaas_config(text)
    assert "never-shown" not in str(e.value)


def test_repr_hides_option_values() -> None:
    assert "admin-secret" not in repr(parse_jaas_config(KAFKA_PLAIN))
