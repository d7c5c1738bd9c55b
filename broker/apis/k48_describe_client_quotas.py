"""DescribeClientQuotas: v0-1, answered from this broker's metadata image (ClientQuotasImage.describe)."""

from __future__ import annotations

from cluster.client_quotas import describe_client_quotas
from protocol.generated.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse

API_KEY = 48
VERSIONS = (0, 1)


async def handle(ctx, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    return describe_client_quotas(ctx.image, req)
