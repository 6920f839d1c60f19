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
from odradek.protocol.doc_markers import write_or_check

DOC = ROOT / "docs" / "security.md"

if __name__ == "__main__":
    sys.exit(write_or_check(DOC, replace_in, sys.argv[1:], "scripts/api_acl_table.py"))
