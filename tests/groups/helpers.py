"""Helpers for the group tests: run a blocking call in a bounded thread, wait for a condition, stand in for the
share coordinator's answer."""

from __future__ import annotations

import asyncio
import threading

from tests.harness import wait_until  # noqa: F401 - the tests' one polling helper, imported from here too


def in_thread(fn, *args):
    """Run ``fn(*args)`` in a thread; ``.result()`` joins it (bounded) and returns or raises."""
    box: dict = {}

    def run():
        try:
            box["v"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001
            box["e"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()

    class R:
        def result(self, timeout: float = 30.0):
            t.join(timeout)
            assert not t.is_alive(), "thread did not finish in time"
            if "e" in box:
                raise box["e"]
            return box["v"]

    return R()


def share_state_initialized(embedded, group: str, topic: str, partitions) -> None:
    """What the share coordinator's answer to an InitializeShareGroupState does (GroupCoordinatorShard.
    share_group_initialized, run by the group service on an EmbeddedBroker's loop): a stand-in until it is served."""
    from cluster.groups.group_coordinator import GroupCoordinatorShard

    broker = embedded.broker
    topic_id = broker.metadata.image.topic(topic).topic_id
    fut = asyncio.run_coroutine_threadsafe(broker.groups.run(
        group, GroupCoordinatorShard.share_group_initialized, group, {topic_id: set(partitions)}), embedded._loop)
    assert fut.result(timeout=10).error is None
