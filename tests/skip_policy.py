"""A skipped test must say why in words the repository agrees with: its reason matches a pattern in
tests/skip_allowlist.txt, or the run fails (a broken install must not pass as a skip)."""

from __future__ import annotations

import re
from pathlib import Path

ALLOWLIST = Path(__file__).with_name("skip_allowlist.txt")


def load_patterns(path: Path = ALLOWLIST) -> list[re.Pattern]:
    """One regular expression per line; blank lines and ``#`` comments ignored."""
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(re.compile(line))
    return out


def unexpected_skips(skips: list[tuple[str, str]], patterns: list[re.Pattern]) -> list[tuple[str, str]]:
    """(test id, reason) of every skip whose reason no pattern matches."""
    return [(nodeid, reason) for nodeid, reason in skips if not any(p.search(reason) for p in patterns)]
