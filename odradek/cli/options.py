"""What the client commands share: where the brokers are, flags in any position, and
how loud the client library may be.

* `-b/--bootstrap-server HOST:PORT[,...]` on every command that talks to brokers; its
  default is `$ODRADEK_BROKERS` (as rpk reads `RPK_BROKERS`), else 127.0.0.1:9092.
* Flags anywhere, as Kafka's tools and rpk take them: `share_options` copies every
  option a command's parser declares onto each of its actions' parsers (and the
  top-level `-v` onto every command), with a suppressed default so that a flag given
  after the action only overrides when it is given. `odradek topics create demo
  --bootstrap-server H:P` and `odradek topics --bootstrap-server H:P create demo`
  mean the same.
* librdkafka's log lines (`%3|...|FAIL|rdkafka#producer-1| ...`) never reach stderr
  raw: every confluent-kafka client of the CLI gets `librdkafka_logging()` in its
  settings, which routes them to the logger `odradek.cli.librdkafka`. It is silent
  unless `-v` is given; with it each distinct line is shown once, as
  `odradek: librdkafka: <what happened>`. The CLI's own messages say what failed.
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import re
import sys
import threading
from typing import Any

ENV_BROKERS = "ODRADEK_BROKERS"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

LIBRDKAFKA_LOG = logging.getLogger("odradek.cli.librdkafka")
LIBRDKAFKA_LOG.propagate = False
LIBRDKAFKA_LOG.setLevel(logging.CRITICAL + 1)  # silent until configure_verbosity


def default_bootstrap() -> str:
    return os.environ.get(ENV_BROKERS, "").strip() or DEFAULT_BOOTSTRAP


def add_bootstrap_argument(parser: argparse.ArgumentParser | Any) -> None:
    """`-b/--bootstrap-server` on a command's parser."""
    parser.add_argument(
        "-b", "--bootstrap-server", default=default_bootstrap(), metavar="HOST:PORT[,...]",
        help=f"brokers to connect to first (default: ${ENV_BROKERS} if set, else "
             f"{DEFAULT_BOOTSTRAP}; now %(default)s)")


def add_verbose_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="show the Kafka client library's log lines (each once); "
                             "-vv adds its debug lines")


def share_options(parser: argparse.ArgumentParser,
                  inherited: tuple[argparse.Action, ...] = ()) -> None:
    """Make `parser`'s options (and `inherited` ones) valid after any sub-action too."""
    own = tuple(a for a in parser._actions
                if a.option_strings and not isinstance(a, argparse._HelpAction))
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for group in subparsers:
        children: dict[int, argparse.ArgumentParser] = {
            id(p): p for p in group.choices.values()}  # aliases share a parser
        for child in children.values():
            passed = inherited + own
            for action in passed:
                if any(s in child._option_string_actions for s in action.option_strings):
                    continue  # the action has its own flag of that name
                shared = copy.copy(action)
                if isinstance(shared.help, str):  # its default is the parent's
                    shared.help = shared.help.replace("%(default)s", str(action.default))
                shared.default = argparse.SUPPRESS
                shared.required = False
                child._add_action(shared)
            share_options(child, passed)


class _OncePerLine(logging.Filter):
    """Drop a librdkafka line seen before (timings like "after 0ms" ignored)."""

    _varying = re.compile(r"\d+(\.\d+)?\s*ms|#\d+")

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        key = self._varying.sub("", record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


def configure_verbosity(verbose: int) -> None:
    """`-v`: librdkafka's warnings and errors on stderr, each once; `-vv`: its debug too."""
    for handler in list(LIBRDKAFKA_LOG.handlers):
        LIBRDKAFKA_LOG.removeHandler(handler)
    if verbose <= 0:
        LIBRDKAFKA_LOG.setLevel(logging.CRITICAL + 1)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("odradek: librdkafka: %(message)s"))
    handler.addFilter(_OncePerLine())
    LIBRDKAFKA_LOG.addHandler(handler)
    LIBRDKAFKA_LOG.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)


def librdkafka_logging() -> dict[str, Any]:
    """Settings for a confluent-kafka client: its log lines go to LIBRDKAFKA_LOG."""
    return {"logger": LIBRDKAFKA_LOG}


def serve_logs(admin: Any) -> Any:
    """An AdminClient whose log lines are shown with -v: librdkafka hands them over
    only in poll(), which nothing else calls on an admin client, so a daemon thread
    does while the command runs."""
    if LIBRDKAFKA_LOG.level <= logging.INFO:
        thread = threading.Thread(target=_poll_forever, args=(admin,), daemon=True,
                                  name="librdkafka-log")
        thread.start()
    return admin


def _poll_forever(client: Any) -> None:
    while True:
        client.poll(0.2)


_UNREACHABLE = ("_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE")


def error_text(error: BaseException | Any) -> str:
    """A confluent-kafka KafkaException or KafkaError in words (librdkafka's text, not
    its repr), with a hint when no broker answered."""
    if isinstance(error, TimeoutError):  # a future's result(timeout=...) ran out
        return "no answer in time (is a broker listening there? `-v` shows the client's log)"
    err: Any = error.args[0] if isinstance(error, BaseException) and error.args else error
    text = err.str() if callable(getattr(err, "str", None)) else str(err)
    name = err.name() if callable(getattr(err, "name", None)) else ""
    if name in _UNREACHABLE:
        return f"{text} (is a broker listening there? `-v` shows the client's log)"
    return text or name or type(error).__name__
