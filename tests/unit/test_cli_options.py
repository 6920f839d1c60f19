"""CLI flags in any position, $ODRADEK_BROKERS, and no raw librdkafka lines (cli/options.py)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from odradek.cli import main as cli_main
from odradek.cli import options


def _all_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _all_parsers(child, (*path, name))


def test_every_parsers_help_renders() -> None:
    parser = cli_main.build_parser()
    paths = []
    for path, p in _all_parsers(parser):
        assert p.format_help()
        paths.append(path)
    assert ("topics", "create") in paths and ("partitions", "reassign") in paths


def _parse(*argv: str) -> argparse.Namespace:
    return cli_main.build_parser().parse_args(list(argv))


@pytest.mark.parametrize("argv", [
    ("topics", "--bootstrap-server", "h:1", "create", "demo"),
    ("topics", "create", "demo", "--bootstrap-server", "h:1"),
    ("topics", "create", "--bootstrap-server", "h:1", "demo"),
    ("topics", "create", "demo", "-b", "h:1"),
    ("topics", "-b", "h:1", "create", "demo"),
])
def test_the_bootstrap_flag_is_taken_before_or_after_the_action(argv: tuple[str, ...]) -> None:
    args = _parse(*argv)
    assert args.bootstrap_server == "h:1" and args.topic == "demo"


def test_a_flag_after_the_action_overrides_only_when_given() -> None:
    args = _parse("topics", "--timeout", "7", "create", "demo")
    assert args.timeout == 7.0 and args.bootstrap_server == options.default_bootstrap()
    args = _parse("topics", "--timeout", "7", "create", "demo", "--timeout", "9")
    assert args.timeout == 9.0


@pytest.mark.parametrize("command", ["topics", "groups", "transactions", "quotas", "acls", "users"])
def test_every_client_command_takes_dash_b(command: str) -> None:
    parser = cli_main.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "-b" in sub.choices[command]._option_string_actions


def test_verbose_anywhere() -> None:
    assert _parse("-v", "topics", "list").verbose == 1
    assert _parse("topics", "list", "-vv").verbose == 2
    assert _parse("topics", "list").verbose == 0


def test_brokers_default_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(options.ENV_BROKERS, "envhost:1234")
    assert _parse("topics", "list").bootstrap_server == "envhost:1234"
    assert _parse("topics", "list", "-b", "h:1").bootstrap_server == "h:1"
    monkeypatch.setenv(options.ENV_BROKERS, " ")
    assert _parse("topics", "list").bootstrap_server == options.DEFAULT_BOOTSTRAP


@pytest.mark.parametrize("argv", [
    ("topics", "list", "--timeout", "2"),
    ("groups", "list", "--timeout", "2"),
])
def test_an_unreachable_broker_is_one_line_in_words_and_no_librdkafka_noise(argv) -> None:
    r = subprocess.run([sys.executable, "-m", "odradek", *argv, "-b", "127.0.0.1:1"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 1
    assert "%3|" not in r.stderr and "rdkafka#" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "127.0.0.1:1" in lines[0] and "KafkaError{" not in lines[0]
    verbose = subprocess.run([sys.executable, "-m", "odradek", *argv, "-b", "127.0.0.1:1", "-v"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert verbose.returncode == 1
    shown = [line for line in verbose.stderr.splitlines() if "librdkafka:" in line]
    assert shown, verbose.stderr
    assert len(shown) == len(set(shown))  # each line once
