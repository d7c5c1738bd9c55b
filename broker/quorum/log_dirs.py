"""Log directory identity: ``meta.properties`` with cluster.id, node.id and directory.id (Kafka 4.x); where the
metadata log lives."""

from __future__ import annotations

import base64
import logging
import os
from pathlib import Path

from broker.errors import StartupError
from protocol.topics import METADATA_PARTITION, METADATA_TOPIC
from storage.checkpoints import MetaProperties, random_uuid

log = logging.getLogger("odradek.log_dirs")

METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-{METADATA_PARTITION}"


def metadata_log_dir(config_dirs: list[Path], metadata_log_dir: str | None) -> Path:
    """``metadata.log.dir`` if set, else the first of ``log.dirs`` (KafkaConfig.metadataLogDir)."""
    return Path(os.path.abspath(metadata_log_dir)) if metadata_log_dir else config_dirs[0]


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
        raise StartupError("the log dirs disagree on cluster.id: "
                           + ", ".join(f"{d}/meta.properties has {m.cluster_id}" for d, m in sorted(found.items())))
    for d, m in found.items():  # Kafka's MetaPropertiesEnsemble.verify messages
        if cluster_id and m.cluster_id and m.cluster_id != cluster_id:
            raise StartupError(f"Invalid cluster.id in: {d}/meta.properties. Expected {cluster_id}, but read "
                               f"{m.cluster_id}")
        if m.node_id != node_id:
            raise StartupError(f"Stored node id {m.node_id} doesn't match previous node id {node_id} in "
                               f"{d}/meta.properties. If you moved your data, make sure your configured node id "
                               f"matches. If you intend to create a new node, you should remove all data in your "
                               f"data directories.")
    if ids:
        cluster_id = ids.pop()
    cluster_id = cluster_id or new_cluster_id()
    for d in log_dirs:
        if d not in found:
            os.makedirs(d, exist_ok=True)
            MetaProperties(version=1, cluster_id=cluster_id, node_id=node_id,
                           directory_id=random_uuid()).write(str(d / "meta.properties"))
            log.info("formatted %s for cluster %s", d, cluster_id)
    return cluster_id


def format_log_dirs(log_dirs: list[Path], node_id: int, cluster_id: str, ignore_formatted: bool = False) -> list[Path]:
    """``kafka-storage.sh format``: meta.properties in every log dir; a formatted one is an error unless
    ``ignore_formatted``. Returns the directories formatted now."""
    done = []
    for d in log_dirs:
        if (d / "meta.properties").exists():
            if ignore_formatted:
                continue
            raise StartupError(f"Log directory {d} is already formatted. Use --ignore-formatted to ignore this "
                               f"directory and format the others.")
        os.makedirs(d, exist_ok=True)
        MetaProperties(version=1, cluster_id=cluster_id, node_id=node_id,
                       directory_id=random_uuid()).write(str(d / "meta.properties"))
        done.append(d)
    return done
