"""Delegation tokens (KIP-48) are not built: the four token APIs answer as a Kafka broker without
``delegation.token.secret.key`` does (KafkaApis / ControllerApis): DELEGATION_TOKEN_REQUEST_NOT_ALLOWED where Kafka
never takes token requests (a PLAINTEXT connection, one-way SSL, a token-authenticated session), else
DELEGATION_TOKEN_AUTH_DISABLED."""

from __future__ import annotations

from protocol.errors import ErrorCode


def token_request_error(protocol: str, principal: str) -> int:
    """KafkaApis.allowTokenRequests, then the disabled token manager."""
    if protocol == "PLAINTEXT" or (protocol == "SSL" and principal == "User:ANONYMOUS"):
        return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
