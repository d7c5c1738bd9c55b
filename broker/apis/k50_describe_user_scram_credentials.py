"""DescribeUserScramCredentials: v0, answered from this broker's metadata image (ScramImage.describe): mechanisms
and iterations per user, never salts or keys."""

from __future__ import annotations

from cluster.scram_credentials import describe_credentials
from protocol.generated.messages import DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse

API_KEY = 50
VERSIONS = (0, 0)


async def handle(ctx, req: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    return describe_credentials(ctx.image, req)
