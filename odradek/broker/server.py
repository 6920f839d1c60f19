"""`odradek server`: run one broker node until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import platform
import signal
import sys

from ..config import BrokerConfig, ConfigError

log = logging.getLogger("odradek")

MiB = 1 << 20
# glibc's malloc serves a request above M_MMAP_THRESHOLD with its own mmap and gives
# the free top of the heap back to the system past M_TRIM_THRESHOLD; both move with
# the allocation pattern. A fetch reads up to a partition's max bytes (1 MiB by
# default) into a fresh buffer and trims it to whole batches with a copy; when the
# thresholds let those buffers go back to the system, every read faults their pages
# in again. Measured (300,000 records of 1 KiB, one consumer, the same log): 93,000
# minor faults and 630 ms of broker CPU, 1,300 and 330 ms with the thresholds fixed
# as below. The cost: up to MALLOC_TRIM_THRESHOLD_BYTES of freed heap kept in RSS.
MALLOC_MMAP_THRESHOLD_BYTES = 32 * MiB  # glibc's largest on 64-bit
MALLOC_TRIM_THRESHOLD_BYTES = 64 * MiB
_M_TRIM_THRESHOLD = -1  # mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
SUPERVISOR_PID_ENV = "ODRADEK_SUPERVISOR_PID"
_PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)
_MALLOC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def tune_malloc() -> bool:
    """Fix glibc malloc's mmap and trim thresholds (see above); True when set. Left
    alone on other C libraries and when a MALLOC_*_THRESHOLD_ variable is set."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if any(name in os.environ for name in _MALLOC_ENV):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD_BYTES)
                and mallopt(_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD_BYTES))


def stop_with_supervisor() -> None:
    """Under `odradek server --processes N` (cli/server_processes.py), ask Linux to send
    this process SIGTERM when its supervisor dies, so a killed supervisor leaves no
    brokers behind; exit at once if it is already gone."""
    supervisor = os.environ.get(SUPERVISOR_PID_ENV)
    if not supervisor or platform.system() != "Linux":
        return
    prctl = getattr(ctypes.CDLL(None), "prctl", None)
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if str(os.getppid()) != supervisor:
        log.error("the supervisor (pid %s) is gone; not starting", supervisor)
        raise SystemExit(1)


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
    stop_with_supervisor()
    _install_uvloop()
    if not tune_malloc():
        log.debug("malloc thresholds left as they are")
    try:
        return asyncio.run(serve(config))
    except ConfigError as e:  # found while building the broker (TLS key stores, sasl.jaas.config, ...)
        log.error("cannot start: %s", e.message)
        return 1
    except OSError as e:
        log.error("cannot start: %s", e)
        return 1
