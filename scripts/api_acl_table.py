"""Write (or, with --check, compare) docs/security.md's table of what every API
authorizes, rendered from odradek/broker/apis.py.

    python scripts/api_acl_table.py           rewrite the table in docs/security.md
    python scripts/api_acl_table.py --check   exit 1 if the doc differs from apis.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from odradek.broker.api_acl_table import replace_in

DOC = ROOT / "docs" / "security.md"


def main(argv: list[str]) -> int:
    current = DOC.read_text()
    wanted = replace_in(current)
    if "--check" in argv:
        if current != wanted:
            print(f"{DOC} differs from broker/apis.py: run scripts/api_acl_table.py")
            return 1
        return 0
    DOC.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
