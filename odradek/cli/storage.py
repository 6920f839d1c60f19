"""`odradek storage`: prepare log directories, as Kafka's kafka-storage.sh does.

    odradek storage random-uuid
    odradek storage format --cluster-id <id> -c server.properties [--ignore-formatted]
        [--add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]' ...]
        [--standalone | --initial-controllers ID@HOST:PORT:DIRID,... | --no-initial-controllers]
        [--feature NAME=LEVEL ...]
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

`--feature NAME=LEVEL` (`-f`, repeatable, as kafka-storage.sh's) sets the
level a finalized feature starts at; a FeatureLevelRecord goes into the same
file. Without it a new cluster starts at `eligible.leader.replicas.version=1`
and `transaction.version=0` (metadata/features.py).

Dynamic controller quorum (KIP-853, kraft.version 1), as kafka-storage.sh:
a controller configured with `controller.quorum.bootstrap.servers` instead of
`controller.quorum.voters` needs one of

* `--standalone` (`-s`): this controller is the only voter; grow the quorum
  later with `odradek metadata-quorum add-controller`;
* `--initial-controllers` (`-I`) `1@host1:9093:DIRID1,2@host2:9093:DIRID2,...`:
  the first voters with the directory ids of their metadata log dirs (make
  them with `odradek storage random-uuid`); this node's metadata log dir is
  formatted with the id listed for its node.id;
* `--no-initial-controllers` (`-N`): a controller that starts as an observer,
  to be added later.

The first two write the bootstrap snapshot
`__cluster_metadata-0/00000000000000000000-0000000000.checkpoint` (a
KRaftVersionRecord with kraft.version 1 and a VotersRecord) into the metadata
log dir. With static `controller.quorum.voters` (kraft.version 0) these flags
are refused, as Kafka refuses them.
"""

from __future__ import annotations

import argparse
import base64
import uuid
from pathlib import Path
from typing import Any

from odradek.cli.users import ScramSpecError, parse_scram_specs, salted_upsertion
from odradek.config import BrokerConfig, ConfigError, parse_properties
from odradek.metadata import features as F
from odradek.metadata import records as R
from odradek.metadata.bootstrap import write_bootstrap_records
from odradek.metadata.raft_quorum import controller_endpoint
from odradek.metadata.snapshots import MetadataSnapshots, bootstrap_checkpoint
from odradek.raft.config import InvalidVoters, VoterAddress, VoterSet
from odradek.raft.log import OffsetAndEpoch, snapshot_file_name
from odradek.raft.voters import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    encode_kraft_version,
    encode_voters,
    uuid_bytes,
)
from odradek.security import scram


def random_uuid() -> str:
    """A Kafka Uuid: 16 random bytes, base64url without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def meta_properties_text(node_id: int, cluster_id: str, directory_id: str | None = None) -> str:
    return (
        "#Written by odradek storage format\n"
        f"node.id={node_id}\n"
        f"directory.id={directory_id or random_uuid()}\n"
        "version=1\n"
        f"cluster.id={cluster_id}\n"
    )


def format_dirs(
    config: BrokerConfig,
    cluster_id: str,
    ignore_formatted: bool,
    metadata_directory_id: str | None = None,
) -> list[str]:
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
        directory_id = metadata_directory_id if d == config.metadata_log_dir else None
        tmp.write_text(meta_properties_text(config.node_id, cluster_id, directory_id))
        tmp.replace(meta)
        done.append(f"Formatting {d} with metadata.version (odradek) and cluster {cluster_id}")
    return done


def parse_initial_controllers(text: str, listener: str) -> VoterSet:
    """``id@host:port:directoryid,...`` (Kafka's --initial-controllers)."""
    addresses: dict[int, VoterAddress] = {}
    directories: dict[int, str] = {}
    for item in (p.strip() for p in text.split(",") if p.strip()):
        node, at, rest = item.partition("@")
        host_port, colon, directory_id = rest.rpartition(":")
        host, colon2, port = host_port.rpartition(":")
        if not (at and colon and colon2 and node.isdigit() and port.isdigit() and host):
            raise ValueError(f"--initial-controllers: {item!r} is not id@host:port:directoryid")
        try:
            uuid_bytes(directory_id)
        except (InvalidVoters, ValueError):
            raise ValueError(f"--initial-controllers: {directory_id!r} is not a Kafka Uuid "
                             "(odradek storage random-uuid makes one)") from None
        node_id = int(node)
        if node_id in addresses or directory_id in directories.values():
            raise ValueError(f"--initial-controllers: node {node_id} or its directory id "
                             "appears twice")
        addresses[node_id] = VoterAddress(node_id, host.strip("[]"), int(port), listener)
        directories[node_id] = directory_id
    if not addresses:
        raise ValueError("--initial-controllers: no controller given")
    return VoterSet(frozenset(addresses), addresses, directories)


def bootstrap_voters(args: argparse.Namespace, config: BrokerConfig) -> VoterSet | None:
    """The first voter set `--standalone` / `--initial-controllers` ask for;
    None for a static quorum or --no-initial-controllers. Raises ValueError."""
    dynamic_flag = args.standalone or args.initial_controllers or args.no_initial_controllers
    is_controller = "controller" in config.process_roles
    if dynamic_flag and not is_controller:
        raise ValueError("--standalone, --initial-controllers and --no-initial-controllers "
                         "are for a node with the controller role")
    if dynamic_flag and config.quorum_voters:
        raise ValueError("controller.quorum.voters is set (a static quorum, kraft.version 0): "
                         "use controller.quorum.bootstrap.servers with --standalone, "
                         "--initial-controllers or --no-initial-controllers")
    if is_controller and not config.quorum_voters and config.quorum_bootstrap_servers \
            and not dynamic_flag:
        raise ValueError("controller.quorum.voters is not set: give one of --standalone, "
                         "--initial-controllers or --no-initial-controllers")
    if args.standalone:
        address = controller_endpoint(config)
        return VoterSet(frozenset({config.node_id}), {config.node_id: address},
                        {config.node_id: random_uuid()})
    if args.initial_controllers:
        listener = min(config.controller_listener_names or {"CONTROLLER"})
        voters = parse_initial_controllers(args.initial_controllers, listener)
        if config.node_id not in voters:
            raise ValueError(f"--initial-controllers does not name this node ({config.node_id})")
        return voters
    return None


def write_bootstrap_snapshot(metadata_dir: Path, voters: VoterSet) -> Path:
    path = metadata_dir / "__cluster_metadata-0"
    path.mkdir(parents=True, exist_ok=True)
    snapshot_id = OffsetAndEpoch(0, 0)
    data = bootstrap_checkpoint([(KRAFT_VERSION, encode_kraft_version(1)),
                                 (KRAFT_VOTERS, encode_voters(voters))])
    MetadataSnapshots(path).write(snapshot_id, data)
    return path / snapshot_file_name(snapshot_id)


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


def feature_bootstrap_records(specs: list[str]) -> list[R.MetadataRecord]:
    """FeatureLevelRecords for `--feature NAME=LEVEL` values. Raises ValueError."""
    levels: dict[str, int] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        name = name.strip()
        if not sep or not value.strip().isdigit():
            raise ValueError(f"--feature {spec!r}: expected NAME=LEVEL")
        span = F.SUPPORTED.get(name)
        if span is None:
            raise ValueError(f"--feature {spec!r}: unknown feature; known: {', '.join(sorted(F.SUPPORTED))}")
        level = int(value)
        if level > span[1]:
            raise ValueError(f"--feature {spec!r}: this node supports levels {span[0]}-{span[1]}")
        if name in levels:
            raise ValueError(f"--feature {name} given twice")
        levels[name] = level
    return [R.feature_level_record(name, level) for name, level in levels.items()]


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
            features = feature_bootstrap_records(args.feature)
            voters = bootstrap_voters(args, config)
            directory_id = voters.directory_ids[config.node_id] if voters else None
            for line in format_dirs(config, args.cluster_id, args.ignore_formatted,
                                    directory_id):
                print(line)
            if voters is not None:
                checkpoint = write_bootstrap_snapshot(config.metadata_log_dir, voters)
                print(f"Bootstrap: kraft.version 1, voters "
                      f"{','.join(str(v) for v in sorted(voters.ids))} in {checkpoint}")
            if bootstrap or features:
                path = write_bootstrap_records(config.metadata_log_dir, bootstrap + features)
                print(f"Bootstrap: {len(bootstrap)} SCRAM credential(s), "
                      f"{len(features)} feature level(s) in {path}")
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
            p.add_argument("-f", "--feature", action="append", default=[], metavar="NAME=LEVEL",
                           help="a feature level the cluster starts at, e.g. "
                                "eligible.leader.replicas.version=0; repeatable")
            quorum = p.add_mutually_exclusive_group()
            quorum.add_argument("-s", "--standalone", action="store_true",
                                help="this controller is the only voter (KIP-853)")
            quorum.add_argument("-I", "--initial-controllers", metavar="ID@HOST:PORT:DIRID,...",
                                help="the first voters, with their metadata dirs' ids")
            quorum.add_argument("-N", "--no-initial-controllers", action="store_true",
                                help="a controller that joins later as an observer")
    parser.set_defaults(handler=run)
    return parser
