"""Log directory identity: ``meta.properties`` with cluster.id, node.id and directory.id (Kafka 4.x)."""

from __future__ import annotations

import base64
import logging
import os
from pathlib import Path

from storage.checkpoints import MetaProperties, random_uuid

log = logging.getLogger("odradek.log_dirs")


def new_cluster_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(random_uuid()).decode().rstrip("=")


def ensure_meta_properties(log_dirs: list[Path], node_id: int, cluster_id: str | None = None) -> str:
    """Read (or on first start, write) meta.properties in every log dir; returns the cluster id.

    All directories must agree on cluster.id and node.id, as Kafka's MetaPropertiesEnsemble checks.
    """
    found: dict[Path, MetaProperties] = {}
    for d in log_dirs:
        p = d / "meta.properties"
        if p.exists():
            found[d] = MetaProperties.read(str(p))
    ids = {m.cluster_id for m in found.values() if m.cluster_id}
    if len(ids) > 1:
        raise RuntimeError(f"log dirs disagree on cluster.id: {sorted(ids)}")
    if ids:
        existing = ids.pop()
        if cluster_id and cluster_id != existing:
            raise RuntimeError(f"configured cluster.id {cluster_id} does not match {existing} in meta.properties")
        cluster_id = existing
    for d, m in found.items():
        if m.node_id != node_id:
            raise RuntimeError(f"{d}/meta.properties has node.id {m.node_id}, configured {node_id}")
    cluster_id = cluster_id or new_cluster_id()
    for d in log_dirs:
        if d not in found:
            os.makedirs(d, exist_ok=True)
            MetaProperties(version=1, cluster_id=cluster_id, node_id=node_id,
                           directory_id=random_uuid()).write(str(d / "meta.properties"))
            log.info("formatted %s for cluster %s", d, cluster_id)
    return cluster_id
