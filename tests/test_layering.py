"""Imports flow one way: protocol <- storage <- cluster <- broker, spark_jobs beside broker, and no cycles.

The rules are checked on the source (every ``import`` statement, also inside functions and under
``TYPE_CHECKING``), so a forbidden import fails here before it can tangle the layers.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "storage", "cluster", "broker", "spark_jobs")

# importing package -> module prefixes it must never import
FORBIDDEN = {
    "protocol": ("storage", "cluster", "broker", "spark_jobs"),
    "storage": ("cluster", "broker", "spark_jobs"),
    # pure state machines: time, randomness and I/O come in as arguments
    "cluster": ("storage", "broker", "spark_jobs", "asyncio", "socket", "threading", "time", "random", "uuid",
                "secrets", "selectors", "subprocess"),
    "spark_jobs": ("broker",),
    # handlers get narrow handles (broker/context.py), never the node or the network server
    "broker.apis": ("broker.node", "broker.server", "broker.embedded", "broker.cli"),
    "broker.controller_apis": ("broker.node", "broker.server", "broker.embedded", "broker.cli",
                               "broker.controller_channel"),
}
# calls that are randomness or clocks even without an import of their module
FORBIDDEN_CALLS = {"cluster": ("os.urandom", "os.getrandom")}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(root: Path):
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            if "generated" not in path.parts:
                yield path


def imports_of(path: Path, module: str) -> list[tuple[str, int]]:
    """Every module an import statement in ``path`` names (relative imports resolved), with its line."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out.append((base, node.lineno))
            out += [(f"{base}.{a.name}", node.lineno) for a in node.names]
    return out


def attribute_calls(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    return [(f"{n.func.value.id}.{n.func.attr}", n.lineno) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)]


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layering_violations(root: Path) -> list[str]:
    problems = []
    for path in source_files(root):
        module = module_name(root, path)
        rules = [(scope, banned) for scope, banned in FORBIDDEN.items() if _matches(module, scope)]
        for name, line in imports_of(path, module):
            for scope, banned in rules:
                for prefix in banned:
                    if _matches(name, prefix):
                        problems.append(f"{path.relative_to(root)}:{line}: {scope} must not import {name}")
        for scope, calls in FORBIDDEN_CALLS.items():
            if _matches(module, scope):
                for call, line in attribute_calls(path):
                    if call in calls:
                        problems.append(f"{path.relative_to(root)}:{line}: {scope} must not call {call}")
    return problems


def import_cycles(root: Path) -> list[list[str]]:
    """Strongly connected components of more than one module in our import graph."""
    files = {module_name(root, p): p for p in source_files(root)}
    graph = {}
    for module, path in files.items():
        graph[module] = {name for name, _ in imports_of(path, module) if name in files and name != module}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    counter = 0

    def visit(v: str) -> None:  # Tarjan's algorithm
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_imports_follow_the_layers():
    assert layering_violations(REPO) == []


def test_no_import_cycles():
    assert import_cycles(REPO) == []


def _copy_sources(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for pkg in PACKAGES:
        shutil.copytree(REPO / pkg, root / pkg, ignore=shutil.ignore_patterns("generated", "__pycache__"))
    return root


def test_a_forbidden_import_is_caught(tmp_path):
    root = _copy_sources(tmp_path)
    assert layering_violations(root) == []
    target = root / "cluster" / "controller" / "controller.py"
    target.write_text(target.read_text() + "\n\ndef _later():\n    import time\n    return time.time()\n")
    storage = root / "storage" / "segment.py"
    storage.write_text("from broker.node import Broker  # noqa\n" + storage.read_text())
    problems = layering_violations(root)
    assert any("cluster/controller/controller.py" in p and "must not import time" in p for p in problems)
    assert any("storage/segment.py:1: storage must not import broker.node" in p for p in problems)


def test_an_import_cycle_is_caught(tmp_path):
    root = _copy_sources(tmp_path)
    (root / "protocol" / "records.py").write_text(
        (root / "protocol" / "records.py").read_text() + "\nfrom protocol import compression  # noqa\n")
    (root / "protocol" / "compression.py").write_text(
        (root / "protocol" / "compression.py").read_text() + "\nfrom protocol import records  # noqa\n")
    assert ["protocol.compression", "protocol.records"] in import_cycles(root)
