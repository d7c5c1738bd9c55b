"""The controller listener's handler table (``controller.listener.names``): the KRaft RPCs, DescribeQuorum,
ApiVersions, and the requests the active controller answers. A broker listener never serves these (its
ApiVersions does not list the KRaft RPCs), as Kafka separates them."""

from broker.apis import k18_api_versions
from broker.controller_listener import (
    k01_fetch,
    k19_create_topics,
    k20_delete_topics,
    k33_alter_configs,
    k37_create_partitions,
    k43_elect_leaders,
    k44_incremental_alter_configs,
    k45_alter_partition_reassignments,
    k46_list_partition_reassignments,
    k52_vote,
    k53_begin_quorum_epoch,
    k54_end_quorum_epoch,
    k55_describe_quorum,
    k56_alter_partition,
    k58_envelope,
    k59_fetch_snapshot,
    k62_broker_registration,
    k63_broker_heartbeat,
    k64_unregister_broker,
    k67_allocate_producer_ids,
)
from broker.registry import build_table

CONTROLLER_LISTENER_HANDLERS = build_table([
    k01_fetch,
    k18_api_versions,
    k19_create_topics,
    k20_delete_topics,
    k33_alter_configs,
    k37_create_partitions,
    k43_elect_leaders,
    k44_incremental_alter_configs,
    k45_alter_partition_reassignments,
    k46_list_partition_reassignments,
    k52_vote,
    k53_begin_quorum_epoch,
    k54_end_quorum_epoch,
    k55_describe_quorum,
    k56_alter_partition,
    k58_envelope,
    k59_fetch_snapshot,
    k62_broker_registration,
    k63_broker_heartbeat,
    k64_unregister_broker,
    k67_allocate_producer_ids,
], listener="controller")
