"""RenewDelegationToken: v1-2. Tokens are not built: Kafka's answer without a token secret
(broker/security/delegation_tokens.py)."""

from __future__ import annotations

from broker.security.delegation_tokens import token_request_error
from protocol.generated.messages import RenewDelegationTokenRequest, RenewDelegationTokenResponse

API_KEY = 39
VERSIONS = (1, 2)


async def handle(ctx, req: RenewDelegationTokenRequest) -> RenewDelegationTokenResponse:
    return RenewDelegationTokenResponse(
        error_code=token_request_error(ctx.config.security_protocol(ctx.listener), ctx.principal),
        expiry_timestamp_ms=-1)
