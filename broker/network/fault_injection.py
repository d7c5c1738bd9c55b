"""A test-only fault hook: drop or delay this node's traffic to named nodes (a network partition, a slow link).

Off unless ``odradek.test.fault.injection.file`` names a file, and refused unless every listener is on a
loopback address (it must never run where real traffic flows). The file holds JSON that the test rewrites
at will, e.g. ``{"drop": [2, 3], "delay_ms": {"1": 200}}``; the node reads it again whenever its mtime changes
(checked every 100 ms). ``"drop_api_keys": [1]`` narrows the drops to requests of those API keys (a broker whose
fetches to the leader are lost while its heartbeats and forwarded admin requests still reach the controller).
Every request this node sends to another node (Raft RPCs, the controller channel, replica fetches; all go
through ``NodeClient``) consults it: to a dropped node a request is never sent and its answer never arrives (the
caller's timeout fires, as over a cut link); to a delayed node it leaves late.
A partition between A and B is both sides dropping each other; one side alone is an asymmetric fault.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os

log = logging.getLogger("odradek.fault_injection")

CONFIG_KEY = "odradek.test.fault.injection.file"
POLL_S = 0.1
RULE_CHANGED = "fault injection: dropping traffic to"  # logged on each change (test harnesses wait for it)


class FaultRules:
    """The current rules: which peers are unreachable and how late requests to others leave."""

    def __init__(self) -> None:
        self.dropped: frozenset[int] = frozenset()
        self.dropped_api_keys: frozenset[int] = frozenset()  # empty: requests of every API key
        self.delays_ms: dict[int, int] = {}

    def blocks(self, peer: int | None, api_key: int | None = None) -> bool:
        """Whether a request (of ``api_key``) to ``peer``, or its answer, is lost."""
        if peer is None or peer not in self.dropped:
            return False
        return not self.dropped_api_keys or api_key in self.dropped_api_keys

    def delay_s(self, peer: int | None) -> float:
        return self.delays_ms.get(peer, 0) / 1000.0 if peer is not None else 0.0

    def set(self, drop=(), delay_ms: dict | None = None, drop_api_keys=()) -> None:
        dropped = frozenset(int(n) for n in drop)
        api_keys = frozenset(int(k) for k in drop_api_keys)
        delays = {int(k): int(v) for k, v in (delay_ms or {}).items()}
        if (dropped, api_keys, delays) != (self.dropped, self.dropped_api_keys, self.delays_ms):
            log.warning(RULE_CHANGED + " %s (API keys %s), delaying %s", sorted(dropped) or "nobody",
                        sorted(api_keys) or "all", delays or "nothing")
        self.dropped, self.dropped_api_keys, self.delays_ms = dropped, api_keys, delays


class FaultRulesFile:
    """Keeps ``rules`` in step with the JSON file (a task on the node's event loop)."""

    def __init__(self, path: str, rules: FaultRules) -> None:
        self.path = path
        self.rules = rules
        self._mtime: int | None = None
        self._task: asyncio.Task | None = None

    def load(self) -> None:
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime == self._mtime:
            return
        self._mtime = mtime
        if mtime is None:
            self.rules.set()
            return
        try:
            with open(self.path) as f:
                text = f.read()
            spec = json.loads(text) if text.strip() else {}
            self.rules.set(spec.get("drop", ()), spec.get("delay_ms"), spec.get("drop_api_keys", ()))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            log.error("fault injection: cannot read %s (%s); rules unchanged", self.path, exc)

    def start(self) -> None:
        self.load()
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            self.load()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def check_loopback_only(listener_hosts: list[str]) -> None:
    """The hook is for tests on one machine: refuse it next to any listener that is not loopback."""
    for host in listener_hosts:
        if host == "localhost":
            continue
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"{CONFIG_KEY} is a test-only setting and is refused with the non-loopback "
                             f"listener host {host!r}")
