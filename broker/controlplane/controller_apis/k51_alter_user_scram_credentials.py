"""AlterUserScramCredentials on the controller (ScramControlManager.alterCredentials, KIP-554): the decision is
cluster/scram_credentials.py's; the records commit before the answer, so every broker's next login sees them."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from cluster.scram_credentials import alter_credentials
from protocol.generated.messages import AlterUserScramCredentialsRequest

API_KEY = 51
VERSIONS = (0, 0)


def handle(cctx: ControllerContext, req: AlterUserScramCredentialsRequest) -> ControllerResult:
    records, response = alter_credentials(cctx.image, req)
    return ControllerResult(records, response)
