"""The controller's handlers, one module per API key (Kafka's ControllerApis): pure decisions against the
latest committed image, each returning the records to commit and the response to send once they are.

Brokers reach them only through the controller channel (broker/controlplane/controller_channel.py): client admin
requests forwarded whole in an Envelope, and the broker's own controller RPCs.
"""

from broker.controlplane.controller_apis import k19_create_topics
from broker.controlplane.controller_apis import k20_delete_topics
from broker.controlplane.controller_apis import k30_create_acls
from broker.controlplane.controller_apis import k31_delete_acls
from broker.controlplane.controller_apis import k33_alter_configs
from broker.controlplane.controller_apis import k37_create_partitions
from broker.controlplane.controller_apis import k43_elect_leaders
from broker.controlplane.controller_apis import k44_incremental_alter_configs
from broker.controlplane.controller_apis import k45_alter_partition_reassignments
from broker.controlplane.controller_apis import k46_list_partition_reassignments
from broker.controlplane.controller_apis import k49_alter_client_quotas
from broker.controlplane.controller_apis import k51_alter_user_scram_credentials
from broker.controlplane.controller_apis import k55_describe_quorum
from broker.controlplane.controller_apis import k56_alter_partition
from broker.controlplane.controller_apis import k62_broker_registration
from broker.controlplane.controller_apis import k63_broker_heartbeat
from broker.controlplane.controller_apis import k64_unregister_broker
from broker.controlplane.controller_apis import k67_allocate_producer_ids
from broker.network.registry import build_table

CONTROLLER_HANDLERS = build_table([
    k19_create_topics,
    k20_delete_topics,
    k30_create_acls,
    k31_delete_acls,
    k33_alter_configs,
    k37_create_partitions,
    k43_elect_leaders,
    k44_incremental_alter_configs,
    k45_alter_partition_reassignments,
    k46_list_partition_reassignments,
    k49_alter_client_quotas,
    k51_alter_user_scram_credentials,
    k55_describe_quorum,
    k56_alter_partition,
    k62_broker_registration,
    k63_broker_heartbeat,
    k64_unregister_broker,
    k67_allocate_producer_ids,
], listener="controller")
