"""The import paths from before broker/ and cluster/ were cut into packages still work (broker/moved.py,
cluster/moved.py): each old name is the very module at its new place, ``python -m`` and the ``odradek`` script
run, and nothing in the repository itself uses an old name."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import broker.moved
import cluster.moved

REPO = Path(__file__).resolve().parents[2]
MOVED = {**broker.moved.MOVED, **cluster.moved.MOVED}
BIN = Path(sys.executable).parent


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_is_the_module_at_its_new_place(old):
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_a_moved_package_s_submodules_keep_their_old_names_too():
    import broker.controlplane.controller_apis.k19_create_topics as new
    import broker.replication.fetch_session.cache as new_cache
    from broker.controller_apis import k19_create_topics
    from broker.fetch_session import cache

    assert k19_create_topics is new and cache is new_cache
    assert importlib.import_module("broker.controller_apis.k19_create_topics") is new


def test_the_public_names_users_import():
    from broker import EmbeddedBroker
    from broker.embedded import EmbeddedBroker as old_path
    from broker.embedded_cluster import FAST_FAILOVER, EmbeddedCluster
    from broker.testing.embedded_cluster import EmbeddedCluster as new_path

    assert EmbeddedBroker is old_path and EmbeddedCluster is new_path
    assert FAST_FAILOVER["broker.session.timeout.ms"] > 0
    plugin = importlib.import_module("broker.pytest_plugin")
    assert plugin is importlib.import_module("broker.testing.pytest_plugin")
    assert callable(plugin.odradek) and callable(plugin.odradek_cluster)


def test_a_name_that_never_existed_still_fails():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("broker.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("broker.fetch_session.no_such_module")


@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "broker.cli", "--help"],
    [sys.executable, "-m", "broker.node_runner", "--help"],
    [sys.executable, "-m", "broker.testing.node_runner", "--help"],
    [str(BIN / "odradek"), "--help"],
])
def test_entry_points_run(command, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "usage: odradek" in out.stdout and "dev-cluster" in out.stdout


def _old_names_used(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found += [f"{path.relative_to(REPO)}:{node.lineno}: {n}" for n in names
                  if broker.moved.new_name(n) or cluster.moved.new_name(n)]
    return found


def test_the_repository_imports_only_new_names():
    skip = {REPO / "tests" / "broker" / "test_moved_modules.py"}
    used = []
    for top in ("broker", "cluster", "storage", "protocol", "spark_jobs", "tests", "benchmarks", "docker"):
        for path in sorted((REPO / top).rglob("*.py")):
            if path in skip or "generated" in path.parts or "data" in path.relative_to(REPO).parts[:2]:
                continue
            used += _old_names_used(path)
    assert used == []
