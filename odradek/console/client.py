"""The console's Kafka clients: one shared AdminClient and Producer (confluent-kafka's
clients are thread-safe), a fresh Consumer per browse, and the CLI's blocking
`Connection` for APIs confluent-kafka lacks. All take the `--command-config` settings,
so a secured cluster sees the console as that user and answers only what the user may
see."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from odradek.cli import client_config, options
from odradek.cli import transactions as cli_txn
from odradek.cli.client_config import CommandConfig
from odradek.cli.connection import Connection


class ConsoleError(Exception):
    """A Kafka call that failed, in words, shown on the page."""


FETCH_MAX_BYTES = 4 * 1024 * 1024  # a browsing consumer's per-request and per-partition budget

# What a confluent-kafka call raises when the cluster says no or does not answer.
FAILURES = (KafkaException, TimeoutError, BufferError, ValueError)


@dataclass
class Clients:
    bootstrap: str
    config: CommandConfig | None = None
    timeout_s: float = 10.0
    _admin: Any = None
    _producer: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def settings(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap,
                "socket.timeout.ms": int(self.timeout_s * 1000),
                # a deleted topic the producer or admin knew must stay deleted: their
                # metadata refreshes would create it again on an auto-creating broker
                "allow.auto.create.topics": "false",
                **client_config.librdkafka_settings(self.config),
                **options.librdkafka_logging()}

    @property
    def admin(self) -> Any:
        with self._lock:
            if self._admin is None:
                from confluent_kafka.admin import AdminClient

                self._admin = options.serve_logs(AdminClient(self.settings()))
            return self._admin

    @property
    def producer(self) -> Any:
        with self._lock:
            if self._producer is None:
                from confluent_kafka import Producer

                self._producer = Producer({**self.settings(), "linger.ms": 0,
                                           "client.id": "odradek-console"})
            return self._producer

    def consumer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer({**self.settings(), "group.id": "odradek-console-browser",
                         "fetch.max.bytes": FETCH_MAX_BYTES,
                         "max.partition.fetch.bytes": FETCH_MAX_BYTES,
                         "queued.max.messages.kbytes": FETCH_MAX_BYTES // 1024,
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "earliest", "client.id": "odradek-console"})

    def connect(self, address: str | None, versions: dict[int, int]) -> Connection:
        """The CLI's blocking protocol client to `address` (a bootstrap server by default)."""
        failure: OSError = OSError(f"no bootstrap server in {self.bootstrap!r}")
        for addr in [address] if address else self.bootstrap.split(","):
            try:
                return Connection(addr.strip(), self.timeout_s, versions, b"odradek-console",
                                  self.config)
            except OSError as e:
                failure = e
        raise ConsoleError(f"cannot connect: {failure}")

    def brokers(self, versions: dict[int, int]) -> list[tuple[int, str]]:
        """(node id, host:port) of every broker, from a bootstrap server's Metadata."""
        boot = self.connect(None, versions)
        try:
            return cli_txn._brokers(boot)
        finally:
            boot.close()

    def ask_each_broker(self, versions: dict[int, int], key: int, data: dict[str, Any],
                        what: str) -> list[tuple[int, str, Any]]:
        """One request to every broker: (node id, address, its answer) each; a broker
        that hangs up (it lacks the API or version) or answers an error is said in words."""
        out = []
        for node_id, address in self.brokers(versions):
            conn = self.connect(address, versions)
            try:
                resp = conn.call(key, data)
            except OSError as e:
                raise ConsoleError(f"{what} on broker {node_id} ({address}): {e} "
                                   "(does the broker support it?)") from None
            finally:
                conn.close()
            if resp.error_code.value:
                raise ConsoleError(f"{what} on broker {node_id}: {resp.error_code.name}")
            out.append((node_id, address, resp))
        return out


def text(error: BaseException) -> str:
    """A client failure in words."""
    if isinstance(error, ConsoleError):
        return str(error)
    return options.error_text(error)
