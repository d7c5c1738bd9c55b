"""AlterClientQuotas on the controller (ClientQuotaControlManager, KIP-546): the decision is
cluster/client_quotas.py's; the ClientQuotaRecords commit before the answer (none with ``validate_only``)."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.client_quotas import alter_client_quotas
from cluster.controller import ControllerResult
from protocol.generated.messages import AlterClientQuotasRequest

API_KEY = 49
VERSIONS = (0, 1)


def handle(cctx: ControllerContext, req: AlterClientQuotasRequest) -> ControllerResult:
    records, response = alter_client_quotas(cctx.image, req)
    return ControllerResult(records, response)
