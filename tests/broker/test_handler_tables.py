"""The handler tables declare each API once: the controller listener's table is built from the controller's
handlers, the KRaft RPCs, DescribeQuorum and Envelope; the broker's forwarders take the controller handlers'
versions; no handler module only forwards; where a broker handler and a controller handler share an API key,
their versions agree."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from broker.apis import HANDLERS
from broker.apis.forwarding import FORWARDED
from broker.controlplane.controller_apis import CONTROLLER_HANDLERS
from broker.controlplane.controller_listener import CONTROLLER_LISTENER_HANDLERS
from broker.controlplane.controller_listener.raft_rpc import RAFT_RPC_VERSIONS

REPO = Path(__file__).resolve().parents[2]
FORWARDING_CALLS = {"ctx.controller.forward", "run_on_active_controller", "answer"}


def test_the_controller_listener_serves_the_controllers_apis_at_their_versions():
    for key, h in CONTROLLER_HANDLERS.items():
        assert CONTROLLER_LISTENER_HANDLERS[key].versions == h.versions, h.spec.name
    for key, (_, versions) in RAFT_RPC_VERSIONS.items():
        assert CONTROLLER_LISTENER_HANDLERS[key].versions == versions
    assert set(CONTROLLER_LISTENER_HANDLERS) == set(CONTROLLER_HANDLERS) | set(RAFT_RPC_VERSIONS) | {17, 18, 36, 58}


def test_forwarded_apis_and_shared_keys_have_the_controllers_versions():
    for key in FORWARDED:
        assert HANDLERS[key].versions == CONTROLLER_HANDLERS[key].versions, HANDLERS[key].spec.name
    for key in set(HANDLERS) & set(CONTROLLER_HANDLERS):
        assert HANDLERS[key].versions == CONTROLLER_HANDLERS[key].versions, HANDLERS[key].spec.name


def _callee(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_callee(node.value)}.{node.attr}"
    return ""


def only_forwards(path: Path) -> bool:
    """Whether the module's ``handle`` does nothing but return a forwarding helper's answer."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "handle":
            body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Await) \
                    and isinstance(body[0].value.value, ast.Call):
                return _callee(body[0].value.value.func) in FORWARDING_CALLS
    return False


@pytest.mark.parametrize("package", ["broker/apis", "broker/controller_listener"])
def test_no_handler_module_only_forwards(package):
    assert [p.name for p in sorted((REPO / package).glob("k*.py")) if only_forwards(p)] == []


def test_a_module_that_only_forwards_is_caught(tmp_path):
    planted = tmp_path / "k19_create_topics.py"
    planted.write_text("API_KEY = 19\nVERSIONS = (2, 7)\n\n\nasync def handle(ctx, req):\n"
                       "    return await ctx.controller.forward(ctx, req)\n")
    assert only_forwards(planted)
