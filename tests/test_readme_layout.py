"""The README's Layout table and the tree agree: every row names a directory that exists; every package and its
sub-packages have a row (a package one level deeper is named in its parent's row); every module lying directly in
broker/ or cluster/ is named in its package's row; the brief's fixed top-level layout is all there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "storage", "cluster", "broker", "spark_jobs")
TOP_LEVEL = ("protocol", "storage", "cluster", "broker", "spark_jobs", "config", "tests", "benchmarks", "docker")
LOOSE_MODULES_NAMED = ("broker", "cluster")  # packages whose every top-level module the table accounts for


def layout_rows(readme: str) -> dict[str, str]:
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*`([^`]+/)`\s*\|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def layout_problems(root: Path) -> list[str]:
    rows = layout_rows((root / "README.md").read_text())
    problems = [f"row {path}: no such directory" for path in rows if not (root / path).is_dir()]
    for top in TOP_LEVEL:
        if f"{top}/" not in rows:
            problems.append(f"{top}/: no row")
    for pkg in PACKAGES:
        for init in sorted((root / pkg).rglob("__init__.py")):
            rel = init.parent.relative_to(root)
            if "generated" in rel.parts[1:-1]:
                continue  # generated/'s own packages are the generator's output, described by generated/'s row
            path = f"{rel.as_posix()}/"
            if len(rel.parts) <= 2:
                if path not in rows:
                    problems.append(f"{path}: a package without a row")
                continue
            parent = f"{rel.parent.as_posix()}/"
            if parent in rows and f"`{rel.name}/`" not in rows[parent]:
                problems.append(f"{path}: not named in the row of {parent}")
    for pkg in LOOSE_MODULES_NAMED:
        for module in sorted((root / pkg).glob("*.py")):
            if module.name != "__init__.py" and f"`{module.name}`" not in rows.get(f"{pkg}/", ""):
                problems.append(f"{pkg}/{module.name}: not named in the row of {pkg}/")
    return problems


def test_the_layout_table_matches_the_tree():
    assert layout_problems(REPO) == []


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "README.md").write_text((REPO / "README.md").read_text())
    for top in TOP_LEVEL:
        for path in (REPO / top).rglob("*"):
            if path.suffix == ".py" and "generated" not in path.relative_to(REPO).parts[2:]:
                target = root / path.relative_to(REPO)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("")
        (root / top).mkdir(exist_ok=True)
    return root


def test_a_new_package_a_new_module_and_a_stale_row_are_caught(tmp_path):
    root = _copy(tmp_path)
    assert layout_problems(root) == []
    (root / "broker" / "sandbox").mkdir()
    (root / "broker" / "sandbox" / "__init__.py").write_text("")
    (root / "broker" / "quorum" / "extra").mkdir()
    (root / "broker" / "quorum" / "extra" / "__init__.py").write_text("")
    (root / "cluster" / "stray.py").write_text("")
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("| `broker/groups/` |", "| `broker/gone/` |"))
    assert sorted(layout_problems(root)) == sorted([
        "row broker/gone/: no such directory",
        "broker/groups/: a package without a row",
        "broker/sandbox/: a package without a row",
        "broker/quorum/extra/: not named in the row of broker/quorum/",
        "cluster/stray.py: not named in the row of cluster/",
    ])
