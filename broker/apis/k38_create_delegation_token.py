"""CreateDelegationToken: v1-3 (v0 went in Kafka 4.0, KIP-896). Tokens are not built: Kafka's answer without a
token secret (broker/security/delegation_tokens.py), naming the requester as the owner."""

from __future__ import annotations

from broker.security.delegation_tokens import token_request_error
from protocol.generated.messages import CreateDelegationTokenRequest, CreateDelegationTokenResponse

API_KEY = 38
VERSIONS = (1, 3)


async def handle(ctx, req: CreateDelegationTokenRequest) -> CreateDelegationTokenResponse:
    kind, _, name = ctx.principal.partition(":")
    return CreateDelegationTokenResponse(
        error_code=token_request_error(ctx.config.security_protocol(ctx.listener), ctx.principal),
        principal_type=kind, principal_name=name, token_requester_principal_type=kind,
        token_requester_principal_name=name, issue_timestamp_ms=-1, expiry_timestamp_ms=-1, max_timestamp_ms=-1,
        token_id="", hmac=b"")
