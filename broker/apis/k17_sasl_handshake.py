"""SaslHandshake: v0-1, outside an authentication.

A connection's SASL exchange is run by its authenticator (protocol/sasl_server.py, driven by
broker/network/server.py) before any handler sees a request, and an authenticated connection's SaslHandshake
begins re-authentication there. One that reaches this handler came where no exchange can start (a PLAINTEXT
listener, a client that cannot re-authenticate, a second re-authentication within a second): ILLEGAL_SASL_STATE,
as KafkaApis.handleSaslHandshakeRequest answers.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.generated.messages import SaslHandshakeRequest, SaslHandshakeResponse

API_KEY = 17
VERSIONS = (0, 1)


async def handle(ctx, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
