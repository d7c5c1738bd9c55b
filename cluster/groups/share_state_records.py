"""``__share_group_state`` records in Kafka's format (the share coordinator's log, KIP-932).

The same layout as ``__consumer_offsets`` (ShareCoordinatorRecordSerde extends CoordinatorRecordSerde): the key is
``int16 record type`` + the key struct (version 0), the value ``int16 version`` + the value struct, a tombstone
has a null value. Type 0 is ShareSnapshot (a share-partition's whole state), type 1 ShareUpdate (a delta on the
latest snapshot). Kafka 4.2 writes both values at version 0, with KIP-1226's DeliveryCompleteCount as tagged
field 0. The share coordinator (cluster/share/share_coordinator.py) writes and replays them.
"""

from __future__ import annotations

from cluster.groups.group_records import CoordinatorRecord, decode_record, register_key_types
from protocol.generated.coordinator import ShareSnapshotKey, ShareSnapshotValue, ShareUpdateKey, ShareUpdateValue

# record type -> (key class, value class, value version written) (ShareCoordinatorRecordHelpers)
SHARE_STATE_RECORD_TYPES: dict[int, tuple[type, type, int]] = {
    0: (ShareSnapshotKey, ShareSnapshotValue, 0),
    1: (ShareUpdateKey, ShareUpdateValue, 0),
}
register_key_types(SHARE_STATE_RECORD_TYPES)


def decode_share_state_record(key: bytes, value: bytes | None) -> CoordinatorRecord:
    """One ``__share_group_state`` record; :class:`UnknownRecordType` for a type other than 0 and 1."""
    return decode_record(key, value, SHARE_STATE_RECORD_TYPES)
