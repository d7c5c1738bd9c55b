"""The group coordinator is one object (issue 27, item 5): the consumer-group manager gets named
collaborators from its shard (config, clock, image, timer, group table, uuids, append, complete) and
never the shard itself; no group module reaches into another object's private attributes.

Checked on the source with ``ast``, like tests/test_layering.py, so a reach-back fails here at once.
"""

from __future__ import annotations

import ast
import inspect

from broker.groups import group_service
from cluster.groups import group_classic, group_consumer, group_coordinator, group_share, share_assignor

GROUP_MODULES = (group_consumer, group_coordinator, group_classic, group_service, group_share, share_assignor)


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _private(attr: str) -> bool:
    return attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__"))


def private_reaches(source: str) -> list[str]:
    """``x._name`` where ``x`` is not ``self``: another object's private attribute."""
    return [f"{n.lineno}: {ast.unparse(n)}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Attribute) and _private(n.attr) and not _is_self(n.value)]


def shard_reaches(source: str) -> list[str]:
    """``self.shard`` (or ``self._shard``): the manager holding its shard instead of its collaborators."""
    return [f"{n.lineno}: {ast.unparse(n)}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Attribute) and _is_self(n.value) and n.attr.lstrip("_") == "shard"]


def _source(module) -> str:
    return inspect.getsource(module)


def test_the_consumer_manager_does_not_hold_its_shard():
    assert shard_reaches(_source(group_consumer)) == []
    params = inspect.signature(group_consumer.ConsumerGroupManager.__init__).parameters
    assert "shard" not in params
    assert {"config", "now_ms", "image", "timer", "groups", "remove_group", "new_uuid", "append", "complete",
            "resume_classic_group"} <= set(params)


def test_the_share_manager_does_not_hold_its_shard():
    assert shard_reaches(_source(group_share)) == []
    params = inspect.signature(group_share.ShareGroupManager.__init__).parameters
    assert "shard" not in params
    assert {"config", "now_ms", "image", "timer", "groups", "remove_group", "append", "emit"} <= set(params)


def test_no_group_module_reaches_into_another_objects_privates():
    problems = {m.__name__: private_reaches(_source(m)) for m in GROUP_MODULES}
    assert problems == {m.__name__: [] for m in GROUP_MODULES}


def test_a_reach_back_is_caught():
    planted = _source(group_consumer) + (
        "\n\ndef _later(self):\n"
        "    self.shard.timer._tasks.clear()\n"
        "    other._append([])\n"
        "    self._timer.__class__\n")
    assert any(p.endswith("self.shard") for p in shard_reaches(planted))
    caught = private_reaches(planted)
    assert any(p.endswith("self.shard.timer._tasks") for p in caught)
    assert any(p.endswith("other._append") for p in caught)
    assert not any("__class__" in p for p in caught)  # dunders are not private
