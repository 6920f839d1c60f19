"""One chaos client in a process of its own (tests/chaos/workloads.py starts it).

    python -m tests.chaos.child numbered BOOTSTRAP INTERVAL_S FIRST
    python -m tests.chaos.child keyed BOOTSTRAP INTERVAL_S FIRST
    python -m tests.chaos.child txn BOOTSTRAP INTERVAL_S TRANSACTIONAL_ID FIRST_TXN
    python -m tests.chaos.child group BOOTSTRAP
    python -m tests.chaos.child watch BOOTSTRAP

Prints one line per fact on stdout; SIGTERM makes it finish (flush, close) and
exit 0.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from tests.chaos import workloads as W


def main(argv: list[str]) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    lock = threading.Lock()

    def emit(line: str) -> None:
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    kind, bootstrap, *rest = argv
    loops: dict[str, Any] = {
        "numbered": lambda: W.numbered_loop(bootstrap, float(rest[0]), int(rest[1]), emit,
                                            stop.is_set),
        "keyed": lambda: W.keyed_loop(bootstrap, float(rest[0]), int(rest[1]), emit,
                                      stop.is_set),
        "txn": lambda: W.txn_loop(bootstrap, float(rest[0]), rest[1], int(rest[2]), emit,
                                  stop.is_set),
        "group": lambda: W.group_loop(bootstrap, emit, stop.is_set),
        "watch": lambda: W.watch_loop(bootstrap, emit, stop.is_set),
    }
    loops[kind]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
