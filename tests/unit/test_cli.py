"""The `odradek` command line: help, usage errors, config errors and subcommand loading."""

from __future__ import annotations

import argparse
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from odradek.cli import main as cli
from odradek.config import BrokerConfig


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> list[BrokerConfig]:
    """Replace odradek.broker.server with a stub so no broker starts; record its configs."""
    calls: list[BrokerConfig] = []
    stub = types.ModuleType("odradek.broker.server")

    def run_server(config: BrokerConfig) -> int:
        calls.append(config)
        return 0

    stub.run_server = run_server  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "odradek.broker.server", stub)
    return calls


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_the_server_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--help"], capsys)
    assert code == 0
    assert "server" in out and "Kafka-compatible" in out


def test_server_help_explains_options_and_default_differences(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["server", "--help"], capsys)
    assert code == 0
    for text in ("--config", "--override", "--log-level", "server.properties",
                 "PLAINTEXT://127.0.0.1:9092", "differ from Kafka"):
        assert text in out


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([], capsys)
    assert code == 2
    assert "odradek: error: a command is required" in err


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["serve"], capsys)
    assert code == 2
    assert "invalid choice: 'serve'" in err


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["server", "--port", "9092"], capsys)
    assert code == 2
    assert "unrecognized arguments: --port" in err


def test_bad_log_level_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["server", "--log-level", "loud"], capsys)
    assert code == 2
    assert "--log-level" in err


def test_override_without_equals(capsys: pytest.CaptureFixture[str],
                                 fake_server: list[BrokerConfig]) -> None:
    code, _, err = run(["server", "--override", "num.partitions"], capsys)
    assert code == 2
    assert err.startswith("odradek: error: Invalid override 'num.partitions'")
    assert fake_server == []


def test_unknown_key_stops_start_up(capsys: pytest.CaptureFixture[str],
                                    fake_server: list[BrokerConfig], tmp_path: Path) -> None:
    code, _, err = run(["server", "--override", f"log.dirs={tmp_path}",
                        "--override", "num.partition=3"], capsys)
    assert code == 2
    assert "odradek: error: Unknown configuration 'num.partition'" in err
    assert "num.partitions" in err  # the suggestion
    assert fake_server == []


def test_bad_value_in_file_names_the_key(capsys: pytest.CaptureFixture[str],
                                         fake_server: list[BrokerConfig],
                                         tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={tmp_path}\nlog.segment.bytes=abc\n")
    code, _, err = run(["server", "-c", str(props)], capsys)
    assert code == 2
    assert err.strip() == ("odradek: error: Invalid value 'abc' for configuration "
                           "log.segment.bytes: Not a number of type INT")
    assert fake_server == []


def test_unusable_log_dirs_name_the_key(capsys: pytest.CaptureFixture[str],
                                        fake_server: list[BrokerConfig],
                                        tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    code, _, err = run(["server", "--override", f"log.dirs={blocker / 'logs'}"], capsys)
    assert code == 2
    assert "log.dirs" in err and "not usable" in err
    assert fake_server == []


def test_missing_config_file(capsys: pytest.CaptureFixture[str],
                             fake_server: list[BrokerConfig], tmp_path: Path) -> None:
    code, _, err = run(["server", "-c", str(tmp_path / "missing.properties")], capsys)
    assert code == 2
    assert "Cannot read config file" in err and "missing.properties" in err


def test_valid_config_reaches_run_server(capsys: pytest.CaptureFixture[str],
                                         fake_server: list[BrokerConfig],
                                         tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=3\nnode.id=5\n")
    code, _, _ = run(["server", "--config", str(props), "--override",
                      f"log.dirs={tmp_path / 'data'}", "--override", "num.partitions=4",
                      "--log-level", "warning"], capsys)
    assert code == 0
    (config,) = fake_server
    assert (config.node_id, config.num_partitions) == (5, 4)
    assert config.log_dirs == [tmp_path / "data"]


def test_run_server_exit_code_is_returned(monkeypatch: pytest.MonkeyPatch,
                                          fake_server: list[BrokerConfig],
                                          tmp_path: Path) -> None:
    monkeypatch.setattr(sys.modules["odradek.broker.server"], "run_server", lambda c: 1)
    assert cli.main(["server", "--override", f"log.dirs={tmp_path}"]) == 1


# ---- subcommand modules -----------------------------------------------------------------


def _install_fake_subcommand(monkeypatch: pytest.MonkeyPatch, name: str,
                             seen: list[Any]) -> None:
    module = types.ModuleType(f"odradek.cli.{name}")

    def add_parser(subparsers: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = subparsers.add_parser(name, help=f"{name} stub")
        parser.add_argument("--flag")

        def handler(args: argparse.Namespace) -> int:
            seen.append(args.flag)
            return 7

        parser.set_defaults(handler=handler)
        return parser

    module.add_parser = add_parser  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, f"odradek.cli.{name}", module)


def test_subcommand_module_is_registered_and_dispatched(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[Any] = []
    _install_fake_subcommand(monkeypatch, "topics", seen)
    _, out, _ = run(["--help"], capsys)
    assert "topics stub" in out
    assert cli.main(["topics", "--flag", "x"]) == 7
    assert seen == ["x"]


def test_missing_subcommand_modules_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "SUBCOMMANDS", ("server", "no_such_command_module"))
    parser = cli.build_parser()
    assert parser.parse_args(["server"]).handler is cli.run_server_command


def test_broken_subcommand_module_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> types.ModuleType:
        raise ModuleNotFoundError("No module named 'missing_dependency'",
                                  name="missing_dependency")

    monkeypatch.setattr(cli, "SUBCOMMANDS", ("server", "topics"))
    monkeypatch.setattr(cli.importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError, match="missing_dependency"):
        cli.build_parser()


def test_python_dash_m_odradek_runs_the_cli() -> None:
    result = subprocess.run([sys.executable, "-m", "odradek", "server", "--help"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0
    assert "--override" in result.stdout
