"""How this node reaches the other nodes: the one factory of its ``NodeClient`` connections (Raft RPCs, the
controller channel, replica fetches).

The test-only fault hook (broker/network/fault_injection.py) reaches the network through this seam and nowhere else: the
node builds its ``PeerLinks`` with the hook's rules when ``odradek.test.fault.injection.file`` is set, and every
part that talks to a peer asks it for a client, knowing nothing of faults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.network.fault_injection import FaultRules
from broker.network.node_client import NodeClient

if TYPE_CHECKING:
    from broker.security.node_links import LinkSecurity


class PeerLinks:
    """Links to one listener of the peers (the inter-broker one, or the controllers'), with its ``security``."""

    def __init__(self, faults: FaultRules | None = None, security: "LinkSecurity | None" = None) -> None:
        self._faults = faults
        self.security = security

    def client(self, host: str, port: int, client_id: str, peer: int | None = None) -> NodeClient:
        """A connection to node ``peer`` at ``host:port``."""
        return NodeClient(host, port, client_id, peer=peer, faults=self._faults, security=self.security)


DIRECT = PeerLinks()  # no fault hook: what a node uses unless the test-only hook is on
