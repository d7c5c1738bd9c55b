"""DescribeDelegationToken: v1-3. Tokens are not built: Kafka's answer without a token secret
(broker/security/delegation_tokens.py), no tokens."""

from __future__ import annotations

from broker.security.delegation_tokens import token_request_error
from protocol.generated.messages import DescribeDelegationTokenRequest, DescribeDelegationTokenResponse

API_KEY = 41
VERSIONS = (1, 3)


async def handle(ctx, req: DescribeDelegationTokenRequest) -> DescribeDelegationTokenResponse:
    return DescribeDelegationTokenResponse(
        error_code=token_request_error(ctx.config.security_protocol(ctx.listener), ctx.principal), tokens=[])
