"""``bootstrap.checkpoint``: the metadata a new cluster starts with, written by ``odradek format`` into the
metadata log directory of controllers as Kafka's ``kafka-storage.sh format`` does (BootstrapDirectory): a
file in KRaft snapshot format holding FeatureLevelRecords and the SCRAM credentials of ``--add-scram`` (KIP-900,
so brokers can authenticate to each other with SCRAM before anyone could create a user). The first active
controller of an empty metadata log commits them.
"""

from __future__ import annotations

import os
from pathlib import Path

from broker.quorum.metadata_snapshot import SnapshotError, snapshot_records, write_snapshot
from cluster.controller import SUPPORTED_FEATURES
from cluster.metadata_image import MetadataImage
import base64
import re
import secrets

from protocol.generated.metadata import FeatureLevelRecord, UserScramCredentialRecord
from protocol.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism, credential, credential_from_salted_password

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


def write_bootstrap(metadata_dir: Path, features: dict[str, int], extra: list | None = None) -> Path:
    """The bootstrap file (temp, fsync, rename); zero levels are left out, as Kafka does."""
    check_features(features)
    records = [FeatureLevelRecord(name=n, feature_level=v) for n, v in sorted(features.items()) if v]
    records += list(extra or [])
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


def read_bootstrap(metadata_dir: Path) -> tuple[dict[str, int] | None, list]:
    """(the feature levels, the other records) of the bootstrap file; (None, []) when the directory has none
    (this release's defaults). The other records (SCRAM credentials from ``--add-scram``; any record, as Kafka's
    BootstrapMetadata) are the new cluster's first batch beside the features."""
    path = metadata_dir / BOOTSTRAP_FILE
    if not path.exists():
        return None, []
    try:
        records = snapshot_records(path.read_bytes())
    except SnapshotError as exc:
        raise BootstrapError(f"{path} is damaged: {exc}") from None
    return ({r.name: r.feature_level for r in records if isinstance(r, FeatureLevelRecord)},
            [r for r in records if not isinstance(r, FeatureLevelRecord)])


_ADD_SCRAM = re.compile(r"(SCRAM-SHA-(?:256|512))=\[(.*)\]", re.S)


def parse_add_scram(text: str) -> UserScramCredentialRecord:
    """``--add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'`` (KIP-900: also ``iterations``, and
    ``salt`` with ``saltedpassword`` in base64 instead of a password). Errors never quote a password."""
    m = _ADD_SCRAM.fullmatch(text.strip())
    if m is None:
        raise BootstrapError("--add-scram takes SCRAM-SHA-256=[name=...,password=...] or SCRAM-SHA-512=[...]")
    mechanism = ScramMechanism.for_name(m.group(1))
    fields: dict[str, str] = {}
    for item in re.findall(r'([a-zA-Z]+)=("(?:[^"\\]|\\.)*"|[^,]*)', m.group(2)):
        key, value = item
        fields[key.lower()] = value[1:-1] if value.startswith('"') and value.endswith('"') else value
    name = fields.get("name")
    if not name:
        raise BootstrapError("--add-scram needs name=")
    iterations = int(fields.get("iterations") or MIN_ITERATIONS)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise BootstrapError(f"--add-scram: iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}")
    try:
        salt = base64.b64decode(fields["salt"], validate=True) if "salt" in fields else secrets.token_bytes(32)
        if "saltedpassword" in fields:
            c = credential_from_salted_password(mechanism, base64.b64decode(fields["saltedpassword"], validate=True),
                                                salt, iterations)
        elif "password" in fields:
            c = credential(mechanism, fields["password"], salt, iterations)
        else:
            raise BootstrapError("--add-scram needs password= (or saltedpassword= with salt=)")
    except (ValueError, KeyError):
        raise BootstrapError("--add-scram: salt and saltedpassword must be base64") from None
    return UserScramCredentialRecord(name=name, mechanism=int(mechanism), salt=c.salt, stored_key=c.stored_key,
                                     server_key=c.server_key, iterations=iterations)
