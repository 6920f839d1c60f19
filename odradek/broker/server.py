"""`odradek server`: run one broker node until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from ..config import BrokerConfig, ConfigError

log = logging.getLogger("odradek")


def _install_uvloop() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a declared dependency
        log.warning("uvloop not available, using the default asyncio loop")
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def serve(config: BrokerConfig) -> int:
    from .broker import Broker

    broker = Broker(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    return 0


def run_server(config: BrokerConfig) -> int:
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )
    _install_uvloop()
    try:
        return asyncio.run(serve(config))
    except ConfigError as e:  # found while building the broker (TLS key stores, sasl.jaas.config, ...)
        log.error("cannot start: %s", e.message)
        return 1
    except OSError as e:
        log.error("cannot start: %s", e)
        return 1
