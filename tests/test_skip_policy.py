"""The skip allow-list: a listed reason passes, anything else (an import that failed, a missing tool) fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.skip_policy import load_patterns, unexpected_skips

REPO = Path(__file__).resolve().parent.parent


def test_listed_reasons_pass_and_others_do_not():
    patterns = load_patterns()
    skips = [("a::x", "needs fork"), ("b::y", "could not import 'storage.cleaner': boom")]
    assert unexpected_skips(skips, patterns) == [("b::y", "could not import 'storage.cleaner': boom")]


def test_a_run_with_an_unlisted_skip_fails(tmp_path):
    body = textwrap.dedent("""
        import pytest

        def test_hides_a_broken_install():
            pytest.importorskip("a_module_that_is_not_installed")

        def test_real():
            assert 1 + 1 == 2
    """)
    (REPO / "tests" / "_tmp_skip_probe_test.py").write_text(body)
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "tests/_tmp_skip_probe_test.py"], cwd=REPO, capture_output=True, text=True, timeout=120)
    finally:
        (REPO / "tests" / "_tmp_skip_probe_test.py").unlink()
    assert run.returncode == 1, run.stdout
    assert "skips not on tests/skip_allowlist.txt" in run.stdout
    assert "a_module_that_is_not_installed" in run.stdout
