"""Helpers for the group tests: run a blocking call in a bounded thread, wait for a condition."""

from __future__ import annotations

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

