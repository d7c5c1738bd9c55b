"""CreateDelegationToken: v1-3 (v0 went in Kafka 4.0, KIP-896). Tokens are not built: Kafka's answer without a
token secret (broker/security/delegation_tokens.py), naming the owner (the requester unless the request names
another) and the requester.

Checks in KafkaApis.handleCreateTokenRequest's order: a connection that may not ask for tokens
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; a token for another owner needs USER CREATE_TOKENS on that owner, else
DELEGATION_TOKEN_AUTHORIZATION_FAILED; a renewer that is not a User INVALID_PRINCIPAL_TYPE; then the controller's
DELEGATION_TOKEN_AUTH_DISABLED.
"""

from __future__ import annotations

from broker.security.delegation_tokens import token_request_error
from cluster.acls import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.generated.messages import CreateDelegationTokenRequest, CreateDelegationTokenResponse

API_KEY = 38
VERSIONS = (1, 3)


async def handle(ctx, req: CreateDelegationTokenRequest) -> CreateDelegationTokenResponse:
    kind, _, name = ctx.principal.partition(":")
    owner_kind, owner_name = (req.owner_principal_type, req.owner_principal_name) if req.owner_principal_name \
        else (kind, name)
    code = token_request_error(ctx.config.security_protocol(ctx.listener), ctx.principal)
    if code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED:
        if (owner_kind, owner_name) != (kind, name) and not ctx.authorize(
                AclOperation.CREATE_TOKENS, ResourceType.USER, f"{owner_kind}:{owner_name}"):
            code = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        elif any(r.principal_type != "User" for r in req.renewers):
            code = ErrorCode.INVALID_PRINCIPAL_TYPE
    return CreateDelegationTokenResponse(
        error_code=code, principal_type=owner_kind, principal_name=owner_name, token_requester_principal_type=kind,
        token_requester_principal_name=name, issue_timestamp_ms=-1, expiry_timestamp_ms=-1, max_timestamp_ms=-1,
        token_id="", hmac=b"")
