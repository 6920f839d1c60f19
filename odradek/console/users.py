"""SCRAM users (as `odradek users`, cli/users.py): who has credentials for which
mechanism and iteration count (DescribeUserScramCredentials; never a secret), adding or
replacing one (AlterUserScramCredentials: librdkafka salts and hashes the password with
a fresh salt, the broker gets the salted password) and deleting one."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.cli import users as cli_users

from .client import FAILURES, Clients, ConsoleError, text

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass
class Credential:
    user: str
    mechanism: str
    iterations: int


def users(clients: Clients) -> list[Credential]:
    try:
        described = clients.admin.describe_user_scram_credentials(None).result(
            timeout=clients.timeout_s)
    except FAILURES as e:
        raise ConsoleError(f"DescribeUserScramCredentials: {text(e)}") from None
    rows = [Credential(user, i.mechanism.name.replace("_", "-"), i.iterations)
            for user, d in described.items() for i in d.scram_credential_infos]
    return sorted(rows, key=lambda c: (c.user, c.mechanism))


def upsert(clients: Clients, user: str, mechanism: str, password: str,
           iterations: int) -> None:
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

    if mechanism not in MECHANISMS:
        raise ConsoleError(f"mechanism: expected one of {', '.join(MECHANISMS)}")
    if not user or not password:
        raise ConsoleError("a user needs a name and a password")
    try:
        iterations, salt, _ = cli_users.salted_upsertion(
            mechanism, {"password": password, "iterations": str(iterations)})
    except ValueError as e:  # iterations out of Kafka's range
        raise ConsoleError(str(e)) from None
    _alter(clients, user, UserScramCredentialUpsertion(
        user, ScramCredentialInfo(cli_users._mechanism_enum(mechanism), iterations),
        password.encode(), salt))


def delete(clients: Clients, user: str, mechanism: str) -> None:
    from confluent_kafka.admin import UserScramCredentialDeletion

    _alter(clients, user, UserScramCredentialDeletion(
        user, cli_users._mechanism_enum(mechanism)))


def _alter(clients: Clients, user: str, alteration: object) -> None:
    futures = clients.admin.alter_user_scram_credentials([alteration],
                                                         request_timeout=clients.timeout_s)
    try:
        futures[user].result(timeout=clients.timeout_s)
    except FAILURES as e:
        raise ConsoleError(f"AlterUserScramCredentials for {user}: {text(e)}") from None
