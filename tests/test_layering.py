"""Imports flow one way: protocol <- storage <- cluster <- broker, spark_jobs beside broker, and no cycles; what
a node runs never reaches test tooling, even transitively; the test-only fault hook has one seam; storage's file
I/O is passed in (``LogManager(file_io=...)``, ``Log.open(file_io=...)``), never a module global to swap.

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
    # handlers get narrow handles (broker/apis/context.py), never the node or the network server
    "broker.apis": ("broker.node", "broker.network.server", "broker.testing.embedded", "broker.cli"),
    "broker.controlplane.controller_apis": ("broker.node", "broker.network.server", "broker.testing.embedded",
                                            "broker.cli", "broker.controlplane.controller_channel"),
}
# calls that are randomness or clocks even without an import of their module
FORBIDDEN_CALLS = {"cluster": ("os.urandom", "os.getrandom")}
# what a node runs (``odradek serve``, ``odradek container-run``) must not reach test tooling, even transitively
NODE_RUNTIME = ("broker.node", "broker.container")
TEST_TOOLING = ("broker.testing",)
# clock reads: the broker's runtime reads time through broker/clock.py (the loop-lag gauge reads the loop's own)
TIME_READS = ("time.time", "time.monotonic", "time.perf_counter", "time.time_ns", "time.monotonic_ns", "loop.time")
TIME_READS_ALLOWED = ("broker.clock", "broker.observability.metrics") + TEST_TOOLING
# protocol/ is sans-IO: no sockets, event loop, threads or files (its code generator reads the schemas: a tool)
PROTOCOL_NO_IO_IMPORTS = ("socket", "asyncio", "selectors", "subprocess", "threading", "shutil", "mmap")
PROTOCOL_NO_IO_CALLS = ("open", "os.open", "os.read", "os.write", "os.pread", "os.pwrite", "os.sendfile", "os.fsync")
# who appends to a partition's log: the leader's and the follower's paths, and the metadata log
LOG_APPENDS = ("append_as_leader", "append_as_follower")
LOG_APPENDERS = ("broker.replication.replica_manager", "broker.replication.replica_fetcher", "broker.quorum.kraft_log")
# the test-only fault hook reaches the network through one seam: only these import it
FAULT_HOOK = "broker.network.fault_injection"
FAULT_HOOK_IMPORTERS = ("broker.network.peer_links", "broker.network.node_client", "broker.node", "broker.config",
                        "broker.testing.embedded_cluster")


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


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of ours (or their packages) its import statements name."""
    files = {module_name(root, p): p for p in source_files(root)}
    graph = {}
    for module, path in files.items():
        names = set()
        for name, _ in imports_of(path, module):
            while name and name not in files:  # ``from pkg import name``: the module, else its package
                name = name.rpartition(".")[0]
            if name and name != module:
                names.add(name)
        graph[module] = names
    return graph


def tooling_reached_by_the_node(root: Path) -> list[str]:
    """Test tooling that a node-runtime module imports, directly or transitively: 'root -> ... -> tooling'."""
    graph = import_graph(root)
    problems = []
    for start in NODE_RUNTIME:
        seen, todo = {start: [start]}, [start]
        while todo:
            here = todo.pop()
            for nxt in sorted(graph.get(here, ())):
                if nxt in seen:
                    continue
                seen[nxt] = seen[here] + [nxt]
                if any(_matches(nxt, t) for t in TEST_TOOLING):
                    problems.append(" -> ".join(seen[nxt]))
                else:
                    todo.append(nxt)
    return problems


def calls(path: Path) -> list[tuple[str, int]]:
    """Every call's callee as written: ``open``, ``os.read``, ``.append_as_leader`` (a method on anything)."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Name):
                out.append((n.func.id, n.lineno))
            elif isinstance(n.func, ast.Attribute):
                base = n.func.value.id if isinstance(n.func.value, ast.Name) else ""
                out.append((f"{base}.{n.func.attr}", n.lineno))
    return out


def protocol_io(root: Path) -> list[str]:
    """I/O in protocol/ (its code generator aside): an import or a call that touches files, sockets or loops."""
    problems = []
    for path in source_files(root):
        module = module_name(root, path)
        if not _matches(module, "protocol") or _matches(module, "protocol.codegen"):
            continue
        problems += [f"{path.relative_to(root)}:{line}: imports {name}" for name, line in imports_of(path, module)
                     if any(_matches(name, banned) for banned in PROTOCOL_NO_IO_IMPORTS)]
        problems += [f"{path.relative_to(root)}:{line}: calls {name}()" for name, line in calls(path)
                     if name in PROTOCOL_NO_IO_CALLS]
    return problems


def log_appends_outside_their_paths(root: Path) -> list[str]:
    """Calls of Log.append_as_leader / append_as_follower outside the modules whose job they are."""
    problems = []
    for path in source_files(root):
        module = module_name(root, path)
        if _matches(module, "storage") or module in LOG_APPENDERS:
            continue
        problems += [f"{path.relative_to(root)}:{line}: {name}()" for name, line in calls(path)
                     if name.rpartition(".")[2] in LOG_APPENDS and "." in name]
    return problems


def direct_time_reads(root: Path) -> list[str]:
    """Clock reads in broker/ outside broker/clock.py (and the loop-lag gauge, and test tooling)."""
    problems = []
    for path in source_files(root):
        module = module_name(root, path)
        if not _matches(module, "broker") or any(_matches(module, a) for a in TIME_READS_ALLOWED):
            continue
        problems += [f"{path.relative_to(root)}:{line}: {call}()" for call, line in attribute_calls(path)
                     if call in TIME_READS]
    return problems


def fault_hook_importers(root: Path) -> list[str]:
    """Modules outside the one seam that import the test-only fault hook."""
    graph = import_graph(root)
    return sorted(m for m, names in graph.items() if FAULT_HOOK in names and m not in FAULT_HOOK_IMPORTERS
                  and m != FAULT_HOOK)


# storage's file-I/O layer: FileIO instances are handed down, so the module holds no instance to replace
FILE_IO_MODULE = "storage/fileio.py"


def file_io_globals(root: Path) -> list[str]:
    """A module-level ``current`` (or any module-level ``FileIO()`` instance) in storage/fileio.py, and any use
    of ``fileio.current`` (attribute, import, ``setattr``) in our packages, the tests or the benchmarks: file I/O is an
    explicit dependency, so a test injects faults by passing its FileIO, not by assigning a global."""
    problems = []
    fileio_path = root / FILE_IO_MODULE
    for node in ast.parse(fileio_path.read_text(), str(fileio_path)).body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        value = getattr(node, "value", None)
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if "current" in names or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                                  and value.func.id == "FileIO"):
            problems.append(f"{FILE_IO_MODULE}:{node.lineno}: module-level file I/O instance {names}")
    paths = list(source_files(root))
    for extra in ("tests", "benchmarks"):
        if (root / extra).is_dir():
            paths += sorted((root / extra).rglob("*.py"))
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        for n in ast.walk(tree):
            if (isinstance(n, ast.Attribute) and n.attr == "current" and isinstance(n.value, ast.Name)
                    and n.value.id == "fileio"):
                problems.append(f"{path.relative_to(root)}:{n.lineno}: fileio.current")
            elif isinstance(n, ast.ImportFrom) and (n.module or "").endswith("fileio") and \
                    any(a.name == "current" for a in n.names):
                problems.append(f"{path.relative_to(root)}:{n.lineno}: imports fileio's current")
            elif (isinstance(n, ast.Call) and len(n.args) >= 2 and isinstance(n.args[0], ast.Name)
                  and n.args[0].id == "fileio" and isinstance(n.args[1], ast.Constant)
                  and n.args[1].value == "current"):
                problems.append(f"{path.relative_to(root)}:{n.lineno}: sets fileio.current")  # monkeypatch.setattr
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


def test_the_node_runtime_imports_no_test_tooling():
    assert tooling_reached_by_the_node(REPO) == []


def test_protocol_does_no_io():
    assert protocol_io(REPO) == []


def test_only_the_replica_paths_and_the_metadata_log_append_to_logs():
    assert log_appends_outside_their_paths(REPO) == []


def test_the_broker_reads_time_through_its_clock():
    assert direct_time_reads(REPO) == []


def test_the_fault_hook_reaches_the_network_through_one_seam():
    assert fault_hook_importers(REPO) == []


def test_no_import_cycles():
    assert import_cycles(REPO) == []


def test_storage_file_io_is_passed_in_not_a_global():
    assert file_io_globals(REPO) == []


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


def test_a_file_io_global_is_caught(tmp_path):
    root = _copy_sources(tmp_path)
    assert file_io_globals(root) == []
    target = root / "storage" / "fileio.py"
    target.write_text(target.read_text() + "\n\ncurrent: FileIO = FileIO()\n")
    user = root / "storage" / "log_manager.py"
    user.write_text(user.read_text() + "\n\ndef _later(d):\n    fileio.current.fsync_dir(d)\n")
    problems = file_io_globals(root)
    assert any(p.startswith("storage/fileio.py:") and "module-level file I/O instance" in p for p in problems)
    assert any(p.startswith("storage/log_manager.py:") and p.endswith("fileio.current") for p in problems)


def test_test_tooling_reached_from_the_node_is_caught(tmp_path):
    root = _copy_sources(tmp_path)
    assert tooling_reached_by_the_node(root) == []
    target = root / "broker" / "quorum" / "log_dirs.py"
    target.write_text(target.read_text() + "\n\ndef _later():\n    from broker.testing.embedded_cluster import "
                      "wait_until  # noqa\n    return wait_until\n")
    assert any(p.startswith("broker.node -> ")
               and p.endswith("broker.quorum.log_dirs -> broker.testing.embedded_cluster")
               for p in tooling_reached_by_the_node(root))


def test_a_second_way_for_the_fault_hook_is_caught(tmp_path):
    root = _copy_sources(tmp_path)
    assert fault_hook_importers(root) == []
    target = root / "broker" / "replication" / "replica_fetcher.py"
    target.write_text("from broker.network.fault_injection import FaultRules  # noqa\n" + target.read_text())
    assert fault_hook_importers(root) == ["broker.replication.replica_fetcher"]


def test_a_direct_time_read_is_caught(tmp_path):
    root = _copy_sources(tmp_path)
    assert direct_time_reads(root) == []
    target = root / "broker" / "network" / "server.py"
    target.write_text(target.read_text() + "\n\ndef _later():\n    import time\n    return time.monotonic()\n")
    assert any(p.startswith("broker/network/server.py:") and p.endswith("time.monotonic()")
               for p in direct_time_reads(root))


def test_io_in_protocol_is_caught(tmp_path):
    root = _copy_sources(tmp_path)
    assert protocol_io(root) == []
    target = root / "protocol" / "records.py"
    target.write_text(target.read_text() + "\n\ndef _later(p):\n    with open(p, 'rb') as f:\n"
                                           "        return f.read()\n")
    framing = root / "protocol" / "framing.py"
    framing.write_text("import socket  # noqa\n" + framing.read_text())
    problems = protocol_io(root)
    assert any(p.startswith("protocol/records.py:") and p.endswith("calls open()") for p in problems)
    assert any(p.startswith("protocol/framing.py:1: imports socket") for p in problems)


def test_a_log_append_elsewhere_is_caught(tmp_path):
    root = _copy_sources(tmp_path)
    assert log_appends_outside_their_paths(root) == []
    target = root / "broker" / "groups" / "group_service.py"
    target.write_text(target.read_text() + "\n\ndef _later(log):\n    return log.append_as_leader(b'', 0, 0)\n")
    assert any(p.startswith("broker/groups/group_service.py:") for p in log_appends_outside_their_paths(root))
