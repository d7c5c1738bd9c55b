"""``bootstrap.checkpoint``: the metadata a new cluster starts with, written by ``odradek format`` into the
metadata log directory of controllers as Kafka's ``kafka-storage.sh format`` does (BootstrapDirectory): a
file in KRaft snapshot format holding FeatureLevelRecords. The first active controller of an empty metadata
log commits them.
"""

from __future__ import annotations

import os
from pathlib import Path

from broker.quorum.metadata_snapshot import SnapshotError, snapshot_records, write_snapshot
from cluster.controller import SUPPORTED_FEATURES
from cluster.metadata_image import MetadataImage
from protocol.generated.metadata import FeatureLevelRecord

BOOTSTRAP_FILE = "bootstrap.checkpoint"


class BootstrapError(ValueError):
    """An unusable ``--feature`` or a damaged bootstrap file; the message says which."""


def check_features(features: dict[str, int]) -> None:
    """Kafka's format checks: a known feature at a level this release supports."""
    for name, level in features.items():
        if name not in SUPPORTED_FEATURES:
            raise BootstrapError(f"Unsupported feature: {name}. Supported features are: "
                                 f"{', '.join(sorted(SUPPORTED_FEATURES))}")
        lo, hi = SUPPORTED_FEATURES[name]
        if not (lo <= level <= hi or (level == 0 and name != "metadata.version")):
            raise BootstrapError(f"Unsupported value {level} for {name}. Supported levels are {lo}-{hi}")


def write_bootstrap(metadata_dir: Path, features: dict[str, int]) -> Path:
    """The bootstrap file (temp, fsync, rename); zero levels are left out, as Kafka does."""
    check_features(features)
    records = [FeatureLevelRecord(name=n, feature_level=v) for n, v in sorted(features.items()) if v]
    data = write_snapshot(MetadataImage().apply(records, -1), epoch=0, last_contained_log_timestamp=-1, now_ms=0)
    metadata_dir.mkdir(parents=True, exist_ok=True)
    path = metadata_dir / BOOTSTRAP_FILE
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read_bootstrap(metadata_dir: Path) -> dict[str, int] | None:
    """The feature levels of the bootstrap file; None when the directory has none (this release's defaults)."""
    path = metadata_dir / BOOTSTRAP_FILE
    if not path.exists():
        return None
    try:
        records = snapshot_records(path.read_bytes())
    except SnapshotError as exc:
        raise BootstrapError(f"{path} is damaged: {exc}") from None
    return {r.name: r.feature_level for r in records if isinstance(r, FeatureLevelRecord)}
