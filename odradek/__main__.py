"""`python -m odradek` and the `odradek` script: the `odradek` command."""

import sys


def run() -> int:
    # kio registers hypothesis strategies for its types whenever hypothesis (a test
    # dependency) is importable: 0.3 s of every start of the command, spent on pytest,
    # trio and hypothesis. The command never needs them, so hypothesis is hidden from
    # this process (kio checks for ImportError) unless something already imported it.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    from odradek.cli.main import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
