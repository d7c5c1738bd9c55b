"""Kafka's FileQuorumStateStore: the ``quorum-state`` file of ``__cluster_metadata-0``.

One line of QuorumStateData JSON with Kafka's field names and a ``data_version``; written to
``quorum-state.tmp``, fsynced, renamed over the old file and the directory fsynced, so a crash leaves either
the old state or the new one. A file that does not parse stops the node with the file named: rejoining with
a forgotten vote or epoch could elect two leaders in one epoch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from cluster.raft.election_state import NO_ID, ElectionState

FILE_NAME = "quorum-state"
DATA_VERSION = "data_version"
SUPPORTED_VERSIONS = (0, 1)


class QuorumStateError(Exception):
    """The quorum-state file is unreadable or corrupt; the message names the file."""


class QuorumStateStore:
    def __init__(self, partition_dir: str | Path) -> None:
        self.path = Path(partition_dir) / FILE_NAME
        self.tmp_path = Path(str(self.path) + ".tmp")

    def read(self) -> ElectionState | None:
        """The stored election state, or None if the node never wrote one."""
        if not self.path.exists():
            return None
        try:
            line = self.path.read_text(encoding="utf-8").split("\n", 1)[0]
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError(f"{data!r} is not an object")
            version = data.get(DATA_VERSION)
            if version not in SUPPORTED_VERSIONS:
                raise ValueError(f"data_version {version!r} is not within the supported versions "
                                 f"{SUPPORTED_VERSIONS[0]}-{SUPPORTED_VERSIONS[-1]}")
            voters = frozenset(int(v["voterId"]) for v in (data.get("currentVoters") or []))
            return ElectionState(epoch=_int(data, "leaderEpoch"), leader_id=_int(data, "leaderId"),
                                 voted_id=_int(data, "votedId"), voters=voters)
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise QuorumStateError(f"Error while reading the Quorum status from the file {self.path}: {exc}") from None

    def write(self, state: ElectionState) -> None:
        """QuorumStateData v0 (kraft.version 0, static voters), made durable before this returns."""
        data = {"clusterId": "", "leaderId": state.leader_id, "leaderEpoch": state.epoch, "votedId": state.voted_id,
                "appliedOffset": 0, "currentVoters": [{"voterId": v} for v in sorted(state.voters)] or None,
                DATA_VERSION: 0}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(self.tmp_path, "w", encoding="utf-8") as f:
                f.write(json.dumps(data, separators=(",", ":")))
                f.flush()
                os.fsync(f.fileno())
            os.replace(self.tmp_path, self.path)
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        finally:
            if self.tmp_path.exists():
                self.tmp_path.unlink()

    def clear(self) -> None:
        for p in (self.path, self.tmp_path):
            if p.exists():
                p.unlink()


def _int(data: dict, key: str) -> int:
    value = data.get(key, NO_ID)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} is not an integer: {value!r}")
    return value
