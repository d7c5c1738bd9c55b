"""The reports' "Replicas" section: when several brokers' log dirs are analysed together, which copy of each
replicated partition was read (:func:`spark_jobs.planning.choose_replica`) and which were left out."""

from __future__ import annotations

import os

from .common import md_table
from .planning import ScanBounds, replica_choices

__all__ = ["replica_section"]


def replica_section(log_dirs: str, bounds: ScanBounds) -> list[str]:
    """Report lines (none if no partition has more than one copy)."""
    choices = replica_choices(log_dirs, bounds)
    if not choices:
        return []
    rows = [(f"{r.pdir.topic}-{r.pdir.partition}", "-" if r.node_id is None else r.node_id,
             f"`{os.path.dirname(r.pdir.path)}`", r.log_end_offset, "read" if r.pdir == c.chosen else "not read")
            for c in choices for r in c.replicas]
    return ["## Replicas", "",
            f"{len(choices)} partition(s) have a copy in more than one log directory. Each is counted once, from "
            "its longest replica: the highest log end offset (end of the last complete batch), ties to the lowest "
            "node.id. The leader is not known from the files; the longest copy holds every offset a consumer "
            "could have read.", "",
            md_table(["partition", "node.id", "log dir", "log end offset", ""], rows)]
