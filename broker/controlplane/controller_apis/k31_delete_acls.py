"""DeleteAcls on the controller (ControllerApis -> AclApis.handleDeleteAcls -> AclControlManager.deleteAcls): ALTER on
the cluster (checked before the handler: broker/controlplane/controller_authorization.py); no
``authorizer.class.name``: SECURITY_DISABLED for every filter; otherwise each filter's matching ACLs
(cluster/controller/acl_control.py), their RemoveAccessControlEntryRecords committed before the answer. Brokers
forward it whole."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from broker.controlplane.controller_apis.k30_create_acls import (
    NO_AUTHORIZER, authorizer_configured,
)
from cluster.controller import ControllerResult
from cluster.controller.acl_control import binding_filter, delete_acls, has_unknown_codes
from protocol.errors import ErrorCode
from protocol.generated.messages import DeleteAclsRequest, DeleteAclsResponse
from protocol.generated.messages.delete_acls_response import DeleteAclsFilterResult, DeleteAclsMatchingAcl

API_KEY = 31
VERSIONS = (1, 3)


def validate_request(req: DeleteAclsRequest) -> None:
    """DeleteAclsRequest.normalizeAndValidate, run as the request is parsed (a failure closes the connection)."""
    for f in req.filters:
        if has_unknown_codes(f.pattern_type_filter, f.resource_type_filter, f.operation, f.permission_type):
            raise ValueError(f"Filters contain UNKNOWN elements, filters: {f}")


def _failed(req: DeleteAclsRequest, code: int, message: str) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=[DeleteAclsFilterResult(error_code=code, error_message=message)
                                              for _ in req.filters])


def handle(cctx: ControllerContext, req: DeleteAclsRequest) -> ControllerResult:
    if not authorizer_configured(cctx):
        return ControllerResult([], _failed(req, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER))
    filters = [binding_filter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                              f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in req.filters]
    records, results = delete_acls(cctx.image.acls, filters)
    out = [DeleteAclsFilterResult(
        error_code=r.error.code, error_message=r.error.message,
        matching_acls=[DeleteAclsMatchingAcl(
            error_code=0, error_message=None, resource_type=int(a.resource_type), resource_name=a.resource_name,
            pattern_type=int(a.pattern_type), principal=a.principal, host=a.host, operation=int(a.operation),
            permission_type=int(a.permission_type)) for a in r.deleted])
        for r in results]
    return ControllerResult(records, DeleteAclsResponse(filter_results=out))
