"""`python -m odradek` runs the `odradek` command."""

import sys

from odradek.cli.main import main

sys.exit(main())
