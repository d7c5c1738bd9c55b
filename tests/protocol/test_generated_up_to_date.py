"""The checked-in generated code is exactly what the generator produces from the schemas."""

from __future__ import annotations

from protocol.codegen.generate import DEFAULT_OUT, DEFAULT_SPEC, render, write


def test_generated_code_is_up_to_date(tmp_path):
    write(render(DEFAULT_SPEC), tmp_path)
    fresh = {p.relative_to(tmp_path): p.read_text() for p in tmp_path.rglob("*.py")}
    checked_in = {p.relative_to(DEFAULT_OUT): p.read_text() for p in DEFAULT_OUT.rglob("*.py")}
    assert set(fresh) == set(checked_in), "run `make generate`"
    stale = sorted(str(p) for p in fresh if fresh[p] != checked_in[p])
    assert not stale, f"stale generated modules (run `make generate`): {stale[:5]}"


def test_generated_code_carries_no_schema_prose():
    for p in DEFAULT_OUT.rglob("*.py"):
        text = p.read_text()
        assert "The broker ID." not in text and '"about"' not in text
