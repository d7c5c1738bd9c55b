"""One module per API key (``kNN_name.py``); ``HANDLERS`` is the only table of what the broker serves."""

from broker.apis import k00_produce
from broker.apis import k01_fetch
from broker.apis import k02_list_offsets
from broker.apis import k03_metadata
from broker.apis import k08_offset_commit
from broker.apis import k09_offset_fetch
from broker.apis import k10_find_coordinator
from broker.apis import k11_join_group
from broker.apis import k12_heartbeat
from broker.apis import k13_leave_group
from broker.apis import k14_sync_group
from broker.apis import k15_describe_groups
from broker.apis import k16_list_groups
from broker.apis import k18_api_versions
from broker.apis import k19_create_topics
from broker.apis import k20_delete_topics
from broker.apis import k21_delete_records
from broker.apis import k22_init_producer_id
from broker.apis import k23_offset_for_leader_epoch
from broker.apis import k32_describe_configs
from broker.apis import k33_alter_configs
from broker.apis import k35_describe_log_dirs
from broker.apis import k37_create_partitions
from broker.apis import k42_delete_groups
from broker.apis import k44_incremental_alter_configs
from broker.apis import k47_offset_delete
from broker.apis import k60_describe_cluster
from broker.apis import k61_describe_producers
from broker.apis import k68_consumer_group_heartbeat
from broker.apis import k69_consumer_group_describe
from broker.apis import k75_describe_topic_partitions
from broker.registry import build_table

HANDLERS = build_table([
    k00_produce,
    k01_fetch,
    k02_list_offsets,
    k03_metadata,
    k08_offset_commit,
    k09_offset_fetch,
    k10_find_coordinator,
    k11_join_group,
    k12_heartbeat,
    k13_leave_group,
    k14_sync_group,
    k15_describe_groups,
    k16_list_groups,
    k18_api_versions,
    k19_create_topics,
    k20_delete_topics,
    k21_delete_records,
    k22_init_producer_id,
    k23_offset_for_leader_epoch,
    k32_describe_configs,
    k33_alter_configs,
    k35_describe_log_dirs,
    k37_create_partitions,
    k42_delete_groups,
    k44_incremental_alter_configs,
    k47_offset_delete,
    k60_describe_cluster,
    k61_describe_producers,
    k68_consumer_group_heartbeat,
    k69_consumer_group_describe,
    k75_describe_topic_partitions,
])
