"""`odradek users`: SCRAM credentials, as Kafka's kafka-configs.sh --entity-type users.

    odradek users describe [USER ...]
    odradek users upsert USER --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    odradek users delete USER [--mechanism SCRAM-SHA-256 ...]  (default: every one it has)

`--add-config` takes Kafka's syntax: one or more `MECHANISM=[key=value,...]`
separated by commas, keys `password` (required) and `iterations` (default
4096; Kafka accepts 4096..16384). The password is salted and hashed here
(PBKDF2, a fresh 32-byte salt); the broker receives the salted password
(AlterUserScramCredentials, KIP-554) and stores only the salt, the iteration
count, StoredKey and ServerKey. Describe shows mechanisms and iterations,
never secrets.

Like every odradek client command: `--bootstrap-server` and `--command-config
FILE`, a properties file with the client's own settings as Kafka's tools take
them (security.protocol, sasl.mechanism, sasl.jaas.config with username and
password, ssl.truststore.* and ssl.keystore.*; see odradek/cli/client_config.py).

Exit status: 0 on success, 1 when the broker refused something, 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from odradek.security import scram

from . import client_config, options, output
from .connection import with_login_check

DEFAULT_TIMEOUT_S = 15.0

_ENTRY = re.compile(r"\s*([A-Za-z0-9-]+)\s*=\s*\[([^\]]*)\]\s*(?:,|$)")


class ScramSpecError(ValueError):
    pass


def parse_scram_specs(text: str) -> list[tuple[str, dict[str, str]]]:
    """`SCRAM-SHA-256=[name=alice,password="x"],SCRAM-SHA-512=[...]` as Kafka's
    kafka-storage and kafka-configs write it: (mechanism, {key: value}) pairs.
    Raises ScramSpecError naming the part at fault (never a password)."""
    out: list[tuple[str, dict[str, str]]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _ENTRY.match(text, pos)
        if m is None:
            raise ScramSpecError(f"expected MECHANISM=[key=value,...] at character {pos}")
        mechanism = m.group(1).upper()
        if mechanism not in scram.MECHANISMS:
            raise ScramSpecError(f"unknown SCRAM mechanism {mechanism}; expected "
                                 f"{' or '.join(scram.MECHANISMS)}")
        options: dict[str, str] = {}
        for part in (p for p in m.group(2).split(",") if p.strip()):
            key, sep, value = part.partition("=")
            key, value = key.strip().lower(), value.strip()
            if not sep or not key:
                raise ScramSpecError(f"{mechanism}: expected key=value, found {key or '?'}")
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            options[key] = value
        out.append((mechanism, options))
        pos = m.end()
    if not out:
        raise ScramSpecError("no MECHANISM=[...] given")
    return out


def salted_upsertion(mechanism: str, options: dict[str, str]
                     ) -> tuple[int, bytes, bytes]:
    """(iterations, salt, salted password) from `password`/`iterations`, or from
    Kafka's `salt`/`saltedpassword` (base64) given as they are."""
    try:
        iterations = int(options.get("iterations", scram.DEFAULT_ITERATIONS))
    except ValueError:
        raise ScramSpecError(f"{mechanism}: iterations must be a number") from None
    if not scram.MIN_ITERATIONS <= iterations <= scram.MAX_ITERATIONS:
        raise ScramSpecError(f"{mechanism}: iterations must be between "
                             f"{scram.MIN_ITERATIONS} and {scram.MAX_ITERATIONS}")
    if "saltedpassword" in options:
        import base64

        try:
            salt = base64.b64decode(options.get("salt", ""), validate=True)
            salted = base64.b64decode(options["saltedpassword"], validate=True)
        except ValueError:
            raise ScramSpecError(f"{mechanism}: salt and saltedpassword must be base64") from None
        if not salt:
            raise ScramSpecError(f"{mechanism}: saltedpassword needs its salt")
        return iterations, salt, salted
    password = options.get("password")
    if not password:
        raise ScramSpecError(f"{mechanism}: a password is required (password=...)")
    salt = os.urandom(scram.SALT_BYTES)
    return iterations, salt, scram.salted_password(mechanism, password, salt, iterations)


def _kafka_error() -> type[Exception]:
    from confluent_kafka import KafkaException  # imported late: keeps --help fast

    return KafkaException


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient  # imported late: keeps --help fast

    return options.serve_logs(AdminClient({"bootstrap.servers": args.bootstrap_server,
                        **client_config.librdkafka_settings(args.command_config),
                        **options.librdkafka_logging()}))


def _mechanism_enum(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism

    return ScramMechanism.SCRAM_SHA_256 if name == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512


def cmd_describe(args: argparse.Namespace) -> int:
    admin = _admin(args)
    futures = admin.describe_user_scram_credentials(args.users or None)
    if not args.users:  # every user: one future for the whole answer
        described = futures.result(timeout=args.timeout)
    else:
        described = {}
        for user, f in futures.items():
            try:
                described[user] = f.result(timeout=args.timeout)
            except _kafka_error() as e:  # the broker's per-user error, e.g. no such user
                print(f"{user}: {e}", file=sys.stderr)
                return 1
    if output.is_json(args):
        output.print_json([
            {"user": user, "credentials": [
                {"mechanism": i.mechanism.name.replace("_", "-"), "iterations": i.iterations}
                for i in d.scram_credential_infos]}
            for user, d in sorted(described.items())])
        return 0
    for user, d in sorted(described.items()):
        infos = ", ".join(f"{i.mechanism.name.replace('_', '-')}(iterations={i.iterations})"
                          for i in d.scram_credential_infos)
        print(f"SCRAM credential configs for user-principal '{user}' are {infos}")
    return 0


def cmd_upsert(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

    upserts = []
    for mechanism, spec in parse_scram_specs(args.add_config):
        if "password" not in spec:
            raise ScramSpecError(f"{mechanism}: a password is required (password=...)")
        iterations, salt, _ = salted_upsertion(mechanism, spec)
        # librdkafka salts and hashes the password itself (PBKDF2, here with our
        # fresh salt): what is sent is the salted password, never the password
        upserts.append(UserScramCredentialUpsertion(
            args.user, ScramCredentialInfo(_mechanism_enum(mechanism), iterations),
            spec["password"].encode(), salt))
    return _alter(args, upserts)


def cmd_delete(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import UserScramCredentialDeletion

    mechanisms = args.mechanism
    if not mechanisms:  # every mechanism the user has
        admin = _admin(args)
        future = admin.describe_user_scram_credentials([args.user])[args.user]
        try:
            infos = future.result(timeout=args.timeout).scram_credential_infos
        except _kafka_error() as e:
            print(f"{args.user}: {e}", file=sys.stderr)
            return 1
        mechanisms = [i.mechanism.name.replace("_", "-") for i in infos]
    deletions = [UserScramCredentialDeletion(args.user, _mechanism_enum(m.upper()))
                 for m in mechanisms]
    return _alter(args, deletions)


def _alter(args: argparse.Namespace, alterations: list[Any]) -> int:
    admin = _admin(args)
    for user, f in admin.alter_user_scram_credentials(alterations).items():
        try:
            f.result(timeout=args.timeout)
        except _kafka_error() as e:
            print(f"{user}: {e}", file=sys.stderr)
            return 1
    print(f"Completed updating config for user {args.user}.")
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        return int(args.users_handler(args))
    except (ScramSpecError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "users", help="SCRAM users: describe, upsert, delete (kafka-configs --entity-type users)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_bootstrap_argument(parser)
    output.add_format_argument(parser)
    client_config.add_argument(parser)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help="seconds to wait for the broker (default: %(default)s)")
    sub = parser.add_subparsers(dest="users_command", metavar="<action>", required=True)
    p = sub.add_parser("describe", help="mechanisms and iterations of users (default: all)")
    p.add_argument("users", nargs="*")
    p.set_defaults(users_handler=cmd_describe)
    p = sub.add_parser("upsert", help="add or replace a user's SCRAM credentials")
    p.add_argument("user")
    p.add_argument("--add-config", required=True, metavar="'MECH=[password=...]'",
                   help="e.g. 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'")
    p.set_defaults(users_handler=cmd_upsert)
    p = sub.add_parser("delete", help="remove a user's SCRAM credentials")
    p.add_argument("user")
    p.add_argument("--mechanism", action="append", choices=list(scram.MECHANISMS),
                   help="only this mechanism; repeatable (default: every one the user has)")
    p.set_defaults(users_handler=cmd_delete)
    parser.set_defaults(handler=with_login_check("users", run))
    return parser
