"""Write (or, with --check, compare) docs/api_versions.md's table of every Kafka
API, the versions odradek serves and Kafka 4.x's, rendered from
odradek/protocol/api.py and kio's schemas.

    python scripts/api_version_table.py           rewrite the table in docs/api_versions.md
    python scripts/api_version_table.py --check   exit 1 if the doc differs from the code
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from odradek.protocol.api_version_table import replace_in
from odradek.protocol.doc_markers import write_or_check

DOC = ROOT / "docs" / "api_versions.md"

if __name__ == "__main__":
    sys.exit(write_or_check(DOC, replace_in, sys.argv[1:], "scripts/api_version_table.py"))
