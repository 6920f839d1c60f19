"""`odradek completion bash`: the script, sourced in a real bash, completes commands,
actions, flags and flag choices from the parsers themselves (cli/completion.py)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")


@pytest.fixture(scope="module")
def script() -> str:
    r = subprocess.run([sys.executable, "-m", "odradek", "completion", "bash"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _complete(script: str, *words: str) -> list[str]:
    line = " ".join(shlex.quote(w) for w in words)
    program = (f"{script}\nCOMP_WORDS=({line}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); "
               "_odradek; printf '%s\\n' \"${COMPREPLY[@]}\"")
    r = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30,
                       check=False)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return [w for w in r.stdout.splitlines() if w]


@pytest.mark.parametrize(("words", "expected"), [
    (("odradek", "to"), ["topics"]),
    (("odradek", "topics", ""), ["list", "describe", "create", "alter-config", "delete"]),
    (("odradek", "topics", "create", "demo", "--rep"), ["--replication-factor"]),
    (("odradek", "topics", "create", "demo", "-o", ""), ["text", "json"]),
    (("odradek", "-v", "groups", "de"), ["describe", "describe-share", "delete",
                                        "delete-share-offsets"]),
    (("odradek", "consume", "t", "--isolation-level", "read_c"), ["read_committed"]),
    (("odradek", "completion", ""), ["bash", "zsh"]),  # a positional's choices
    (("odradek", "server", "--log"), ["--log-level"]),
])
def test_bash_completes_from_the_parsers(script: str, words: tuple[str, ...],
                                         expected: list[str]) -> None:
    assert _complete(script, *words) == expected


def test_zsh_script_loads_bashcompinit() -> None:
    r = subprocess.run([sys.executable, "-m", "odradek", "completion", "zsh"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0
    assert "bashcompinit" in r.stdout.splitlines()[1]
    assert "complete -o default -F _odradek odradek" in r.stdout
