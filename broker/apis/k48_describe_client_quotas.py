"""DescribeClientQuotas: v0-1, answered from this broker's metadata image (ClientQuotasImage.describe).

Authorization (KafkaApis.handleDescribeClientQuotasRequest): CLUSTER DESCRIBE_CONFIGS, else
CLUSTER_AUTHORIZATION_FAILED with its message and null entries (DescribeClientQuotasRequest.getErrorResponse).
"""

from __future__ import annotations

from cluster.acls import AclOperation
from cluster.client_quotas import describe_client_quotas
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse

API_KEY = 48
VERSIONS = (0, 1)


async def handle(ctx, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                            error_message=MESSAGES[ErrorCode.CLUSTER_AUTHORIZATION_FAILED],
                                            entries=None)
    return describe_client_quotas(ctx.image, req)
