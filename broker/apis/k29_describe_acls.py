"""DescribeAcls: v1-3, answered from this broker's metadata image (AclApis.handleDescribeAcls): DESCRIBE on the
cluster else CLUSTER_AUTHORIZATION_FAILED; no authorizer: SECURITY_DISABLED; otherwise the ACLs the filter matches,
one entry per resource pattern (DescribeAclsResponse.aclsResources). A wire code 0 (UNKNOWN) in the filter fails
Kafka's parsing of the request (DescribeAclsRequest.normalizeAndValidate): the connection is closed."""

from __future__ import annotations

from broker.errors import CloseConnection
from cluster.acls import AclOperation
from cluster.controller.acl_control import binding_filter, describe_resources, has_unknown_codes
from protocol.errors import ErrorCode
from protocol.generated.messages import DescribeAclsRequest, DescribeAclsResponse
from protocol.generated.messages.describe_acls_response import AclDescription, DescribeAclsResource

API_KEY = 29
VERSIONS = (1, 3)


async def handle(ctx, req: DescribeAclsRequest) -> DescribeAclsResponse:
    if has_unknown_codes(req.pattern_type_filter, req.resource_type_filter, req.permission_type, req.operation):
        raise CloseConnection(f"DescribeAclsRequest contains UNKNOWN elements: {req}")
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message="Request DescribeAcls is not authorized.")
    if ctx.handles.authorizer is None:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message="No Authorizer is configured on the broker")
    f = binding_filter(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
                       req.principal_filter, req.host_filter, req.operation, req.permission_type)
    resources = [DescribeAclsResource(
        resource_type=int(rtype), resource_name=name, pattern_type=int(ptype),
        acls=[AclDescription(principal=a.principal, host=a.host, operation=int(a.operation),
                             permission_type=int(a.permission_type)) for a in acls])
        for (rtype, name, ptype), acls in describe_resources(ctx.image.acls.values(), f)]
    return DescribeAclsResponse(error_code=0, error_message=None, resources=resources)
