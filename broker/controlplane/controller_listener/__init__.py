"""The controller listener's handler table (``controller.listener.names``), each API declared once: the
controller's own handlers (broker/controlplane/controller_apis/, at their versions) run on the active controller, the
KRaft RPCs go to the Raft driver, DescribeQuorum is answered by any voter, ApiVersions as everywhere. A broker listener
never serves these (its ApiVersions does not list the KRaft RPCs), as Kafka separates them. With an authorizer,
every API but ApiVersions and the SASL exchange is authorized first as the connection's principal
(broker/controlplane/controller_authorization.py): only the nodes (CLUSTER_ACTION) vote, fetch the metadata log,
register, heartbeat or forward Envelopes."""

from broker.apis import k17_sasl_handshake, k18_api_versions, k36_sasl_authenticate
from broker.controlplane.controller_apis import CONTROLLER_HANDLERS
from broker.controlplane.controller_listener import k55_describe_quorum
from broker.controlplane.controller_listener.controller_rpc import run_on_active_controller
from broker.controlplane.controller_listener.raft_rpc import RAFT_RPC_VERSIONS, answer
from broker.network.registry import Declared, build_table

ENVELOPE = Declared(58, (0, 0), run_on_active_controller, "Envelope, run on the active controller")

CONTROLLER_LISTENER_HANDLERS = build_table(
    [k17_sasl_handshake, k18_api_versions, k36_sasl_authenticate, k55_describe_quorum, ENVELOPE]
    + [Declared(h.api_key, h.versions, run_on_active_controller, f"{h.module.__name__}, run on the active controller")
       for h in CONTROLLER_HANDLERS.values() if h.api_key != k55_describe_quorum.API_KEY]
    + [Declared(key, versions, answer, f"{name}, the KRaft RPC")
       for key, (name, versions) in RAFT_RPC_VERSIONS.items()],
    listener="controller")
