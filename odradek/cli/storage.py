"""`odradek storage`: prepare log directories, as Kafka's kafka-storage.sh does.

    odradek storage random-uuid
    odradek storage format --cluster-id <id> -c server.properties [--ignore-formatted]
        [--add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]' ...]
    odradek storage info -c server.properties

`format` writes `meta.properties` (node.id, directory.id, version=1,
cluster.id; the format is in storage/log_manager.py) into every log dir and
the metadata log dir. A dir already formatted for another cluster or node is
an error; with `--ignore-formatted` a dir formatted for the same cluster is
left as it is (Kafka's flag).

`--add-scram` (repeatable; Kafka's syntax: `name` and `password`, or `salt`
and `saltedpassword` in base64, and `iterations`, default 4096) bootstraps
SCRAM users, e.g. the brokers' own inter-broker user. Like Kafka's
bootstrap.checkpoint, the UserScramCredentialRecords (salted; no password)
go into `bootstrap-records.json` in the metadata log dir, one JSON record a
line, and the first active controller of the cluster commits them to its
empty metadata log (broker/controller_service.py).
"""

from __future__ import annotations

import argparse
import base64
import uuid
from pathlib import Path
from typing import Any

from odradek.cli.users import ScramSpecError, parse_scram_specs, salted_upsertion
from odradek.config import BrokerConfig, ConfigError, parse_properties
from odradek.metadata import records as R
from odradek.metadata.bootstrap import write_bootstrap_records
from odradek.security import scram


def random_uuid() -> str:
    """A Kafka Uuid: 16 random bytes, base64url without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def meta_properties_text(node_id: int, cluster_id: str) -> str:
    return (
        "#Written by odradek storage format\n"
        f"node.id={node_id}\n"
        f"directory.id={random_uuid()}\n"
        "version=1\n"
        f"cluster.id={cluster_id}\n"
    )


def format_dirs(config: BrokerConfig, cluster_id: str, ignore_formatted: bool) -> list[str]:
    """Format every dir; returns what was done, one line per dir. Raises ValueError."""
    dirs: list[Path] = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
    done = []
    for d in dirs:
        meta = d / "meta.properties"
        if meta.exists():
            props = parse_properties(meta.read_text())
            if not ignore_formatted:
                raise ValueError(f"Log directory {d} is already formatted. Use "
                                 "--ignore-formatted to ignore this directory and format "
                                 "the others.")
            if props.get("cluster.id") != cluster_id or props.get("node.id") != str(
                config.node_id
            ):
                raise ValueError(f"{d} is formatted for cluster {props.get('cluster.id')} "
                                 f"node {props.get('node.id')}")
            done.append(f"Skipping {d}: already formatted")
            continue
        d.mkdir(parents=True, exist_ok=True)
        tmp = meta.with_suffix(".tmp")
        tmp.write_text(meta_properties_text(config.node_id, cluster_id))
        tmp.replace(meta)
        done.append(f"Formatting {d} with metadata.version (odradek) and cluster {cluster_id}")
    return done


def scram_bootstrap_records(specs: list[str]) -> list[R.MetadataRecord]:
    """UserScramCredentialRecords for `--add-scram` values. Raises ScramSpecError."""
    records = []
    for spec in specs:
        for mechanism, options in parse_scram_specs(spec):
            name = options.get("name")
            if not name:
                raise ScramSpecError(f"{mechanism}: --add-scram needs name=...")
            iterations, salt, salted = salted_upsertion(mechanism, options)
            cred = scram.credential_from_salted(mechanism, salted, salt, iterations)
            records.append(R.user_scram_credential_record(
                name, scram.MECHANISM_ID_BY_NAME[mechanism], cred.salt, cred.stored_key,
                cred.server_key, cred.iterations))
    return records


def _load(args: argparse.Namespace) -> BrokerConfig:
    return BrokerConfig.load(args.config, args.override)


def run(args: argparse.Namespace) -> int:
    if args.storage_command == "random-uuid":
        print(random_uuid())
        return 0
    try:
        config = _load(args)
    except ConfigError as e:
        print(f"error: {e.message}")
        return 1
    if args.storage_command == "format":
        try:
            bootstrap = scram_bootstrap_records(args.add_scram)
            for line in format_dirs(config, args.cluster_id, args.ignore_formatted):
                print(line)
            if bootstrap:
                path = write_bootstrap_records(config.metadata_log_dir, bootstrap)
                print(f"Bootstrap: {len(bootstrap)} SCRAM credential(s) in {path}")
        except (ValueError, OSError) as e:
            print(f"error: {e}")
            return 1
        return 0
    for d in dict.fromkeys([*config.log_dirs, config.metadata_log_dir]):
        meta = d / "meta.properties"
        print(f"{d}: {meta.read_text().strip() if meta.exists() else 'not formatted'}")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "storage", help="format log directories (kafka-storage.sh)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="storage_command", required=True, metavar="<action>")
    sub.add_parser("random-uuid", help="print a new cluster id")
    for name, text in (("format", "write meta.properties into every log dir"),
                       ("info", "show each log dir's meta.properties")):
        p = sub.add_parser(name, help=text)
        p.add_argument("-c", "--config", metavar="FILE", required=name == "format",
                       help="server.properties")
        p.add_argument("--override", metavar="KEY=VALUE", action="append", default=[])
        if name == "format":
            p.add_argument("-t", "--cluster-id", required=True, help="the cluster id")
            p.add_argument("-g", "--ignore-formatted", action="store_true",
                           help="skip dirs already formatted for this cluster and node")
            p.add_argument("-S", "--add-scram", action="append", default=[],
                           metavar="'MECH=[name=...,password=...]'",
                           help="a SCRAM user to bootstrap, e.g. "
                                "'SCRAM-SHA-256=[name=admin,password=admin-secret]'; "
                                "repeatable")
    parser.set_defaults(handler=run)
    return parser
