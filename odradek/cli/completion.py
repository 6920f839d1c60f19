"""`odradek completion bash|zsh`: a shell completion script made from the command's own
parsers, so that it always knows every command, action, flag and flag choice.

    source <(odradek completion bash)        # or put it in ~/.bashrc
    source <(odradek completion zsh)         # zsh, through bashcompinit

The script holds three tables keyed by the command path ("odradek",
"odradek topics", "odradek topics create", ...): the words that may follow, the flags, and for a
flag with choices (`-o`, `--isolation-level`, ...) its values. Anything else falls
back to file names.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

DESCRIPTION = """\
Print a shell completion script for odradek: commands, actions, flags and the
values of flags with fixed choices.

  source <(odradek completion bash)     # bash; add it to ~/.bashrc to keep it
  source <(odradek completion zsh)      # zsh (uses bashcompinit)
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "completion", help="print a bash or zsh completion script", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shell", choices=("bash", "zsh"))
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from odradek.cli.main import build_parser  # the whole tree, as `odradek` builds it

    sys.stdout.write(script(build_parser(), args.shell))
    return 0


def tables(parser: argparse.ArgumentParser, path: str = "odradek",
           out: dict[str, dict[str, str]] | None = None) -> dict[str, dict[str, str]]:
    """{"children": {path: words}, "flags": {path: flags}, "choices": {path flag: values}};
    paths start with "odradek" (bash's arrays take no empty key)."""
    out = out if out is not None else {"children": {}, "flags": {}, "choices": {}}
    flags: list[str] = []
    children: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                children.append(name)
                tables(child, f"{path} {name}", out)
        elif not action.option_strings and action.choices:  # e.g. `completion bash|zsh`
            children += map(str, action.choices)
        elif action.option_strings:
            flags += action.option_strings
            if action.choices:
                for flag in action.option_strings:
                    out["choices"][f"{path} {flag}"] = " ".join(map(str, action.choices))
    out["children"][path] = " ".join(children)
    out["flags"][path] = " ".join(dict.fromkeys(flags))
    return out


def _assoc(name: str, table: dict[str, str]) -> str:
    items = " ".join(f"[{shlex.quote(k)}]={shlex.quote(v)}" for k, v in sorted(table.items()))
    return f"declare -gA {name}=({items})\n"


_FUNCTION = r"""
_odradek() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} path=odradek w i
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    [[ $w == -* ]] && continue
    if [[ " ${_odradek_children[$path]} " == *" $w "* ]]; then
      path="$path $w"
    fi
  done
  local choices=${_odradek_choices["$path $prev"]}
  if [[ -n $choices ]]; then
    COMPREPLY=($(compgen -W "$choices" -- "$cur"))
  elif [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "${_odradek_flags[$path]}" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "${_odradek_children[$path]}" -- "$cur"))
  fi
}
complete -o default -F _odradek odradek
"""


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    t = tables(parser)
    head = "# odradek completion; made by `odradek completion " + shell + "`\n"
    if shell == "zsh":
        head += "autoload -U +X bashcompinit && bashcompinit\n"
    return (head + _assoc("_odradek_children", t["children"])
            + _assoc("_odradek_flags", t["flags"]) + _assoc("_odradek_choices", t["choices"])
            + _FUNCTION)
