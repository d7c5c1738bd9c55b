"""DescribeUserScramCredentials: v0, answered from this broker's metadata image (ScramImage.describe): mechanisms
and iterations per user, never salts or keys.

Authorization (KafkaApis.handleDescribeUserScramCredentialsRequest): CLUSTER DESCRIBE, else
CLUSTER_AUTHORIZATION_FAILED with its message, at the top and for each user asked for (without its name, as
DescribeUserScramCredentialsRequest.getErrorResponse builds it).
"""

from __future__ import annotations

from cluster.acls import AclOperation
from cluster.scram_credentials import describe_credentials
from protocol.errors import MESSAGES, ErrorCode
from protocol.generated.messages import DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse
from protocol.generated.messages.describe_user_scram_credentials_response import DescribeUserScramCredentialsResult

API_KEY = 50
VERSIONS = (0, 0)


async def handle(ctx, req: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return DescribeUserScramCredentialsResponse(
            error_code=code, error_message=MESSAGES[code],
            results=[DescribeUserScramCredentialsResult(error_code=code, error_message=MESSAGES[code],
                                                        credential_infos=[]) for _ in req.users or ()])
    return describe_credentials(ctx.image, req)
