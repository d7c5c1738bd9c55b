"""SaslAuthenticate: v0-2, outside an authentication.

Tokens of an exchange go to the connection's authenticator (protocol/sasl_server.py) and never reach a handler;
one that does came after the connection authenticated, or on a listener without SASL: ILLEGAL_SASL_STATE with
KafkaApis.handleSaslAuthenticateRequest's message.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.generated.messages import SaslAuthenticateRequest, SaslAuthenticateResponse

API_KEY = 36
VERSIONS = (0, 2)


async def handle(ctx, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                    error_message="SaslAuthenticate request received after successful authentication",
                                    auth_bytes=b"")
