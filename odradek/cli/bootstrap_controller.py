"""`--bootstrap-controller`: talk to the controllers directly, as Kafka's tools do (KIP-919).

`kafka-metadata-quorum.sh` and `kafka-features.sh` take `--bootstrap-controller
HOST:PORT[,...]` (the controllers' controller listeners) instead of
`--bootstrap-server`. As Kafka's admin client, this asks the first listed
controller that answers for DescribeCluster v1 with endpoint type CONTROLLER:
the controllers, their endpoints and the active one; the command's own
requests then go to the active controller. The controller wants ALTER on the
cluster for that DescribeCluster (as Kafka's).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from odradek.protocol import api

from .client_config import CommandConfig
from .connection import Connection

__all__ = ["ActiveController", "active_controller", "add_argument", "target"]

CONTROLLER_ENDPOINTS = 2  # DescribeCluster v1 endpoint_type (KIP-919)
VERSIONS: dict[int, int] = {api.ApiKey.DESCRIBE_CLUSTER: 1}


@dataclass(frozen=True, slots=True)
class ActiveController:
    address: str  # HOST:PORT of its controller listener
    node_id: int
    cluster_id: str


def add_argument(parser: argparse.ArgumentParser | Any) -> None:
    parser.add_argument(
        "--bootstrap-controller", metavar="HOST:PORT[,...]", default=None,
        help="controllers to connect to (their controller listener) instead of brokers; "
             "the requests go to the active controller")


def active_controller(bootstrap: str, timeout_s: float,
                      config: CommandConfig | None) -> ActiveController:
    """The active controller, as the first listed controller that answers says.
    Raises OSError saying why not."""
    failure: OSError = OSError(f"no controller in {bootstrap!r}")
    for address in filter(None, (a.strip() for a in bootstrap.split(","))):
        try:
            conn = Connection(address, timeout_s, VERSIONS, b"odradek-cli", config)
        except OSError as e:
            failure = OSError(f"cannot connect to {address}: {e}")
            continue
        try:
            resp = conn.call(api.ApiKey.DESCRIBE_CLUSTER, {
                "include_cluster_authorized_operations": False,
                "endpoint_type": CONTROLLER_ENDPOINTS})
        except OSError as e:
            failure = OSError(f"{address}: {e}")
            continue
        finally:
            conn.close()
        code = int(resp.error_code.value)
        if code:
            detail = f": {resp.error_message}" if resp.error_message else ""
            raise OSError(f"{address} refused DescribeCluster "
                          f"({resp.error_code.name}){detail}; is it a controller listener?")
        leader = int(resp.controller_id)
        for node in resp.brokers:
            if int(node.broker_id) == leader:
                return ActiveController(f"{node.host}:{int(node.port)}", leader,
                                        str(resp.cluster_id))
        failure = OSError(f"{address} knows no active controller (leader {leader})")
    raise failure


def target(args: argparse.Namespace) -> tuple[str, ActiveController | None]:
    """Where the command's requests go: the active controller with
    --bootstrap-controller, else the --bootstrap-server list. Raises OSError."""
    bootstrap = getattr(args, "bootstrap_controller", None)
    if not bootstrap:
        return args.bootstrap_server, None
    active = active_controller(bootstrap, args.timeout, args.command_config)
    return active.address, active
