"""CreateAcls on the controller (ControllerApis -> AclApis.handleCreateAcls -> AclControlManager.createAcls): ALTER on
the cluster (checked before the handler: broker/controlplane/controller_authorization.py); no
``authorizer.class.name``: SECURITY_DISABLED for every creation; otherwise one result per creation
(cluster/controller/acl_control.py), the AccessControlEntryRecords committed before the answer. Brokers forward it
whole (broker/apis/forwarding.py)."""

from __future__ import annotations

from broker.controlplane.controller_apis.context import ControllerContext
from cluster.controller import ControllerResult
from cluster.controller.acl_control import binding, create_acls, has_unknown_codes
from protocol.errors import ErrorCode
from protocol.generated.messages import CreateAclsRequest, CreateAclsResponse
from protocol.generated.messages.create_acls_response import AclCreationResult

API_KEY = 30
VERSIONS = (1, 3)

NO_AUTHORIZER = "No Authorizer is configured."  # AclApis' SecurityDisabledException


def validate_request(req: CreateAclsRequest) -> None:
    """CreateAclsRequest.validate, run as the request is parsed (a failure closes the client's connection)."""
    for c in req.creations:
        if has_unknown_codes(c.resource_pattern_type, c.resource_type, c.permission_type, c.operation):
            raise ValueError(f"CreatableAcls contain unknown elements: {c}")


def authorizer_configured(cctx: ControllerContext) -> bool:
    return bool(cctx.config.get("authorizer.class.name"))


def _result(code: int, message: str | None) -> AclCreationResult:
    return AclCreationResult(error_code=code, error_message=message)


def handle(cctx: ControllerContext, req: CreateAclsRequest) -> ControllerResult:
    if not authorizer_configured(cctx):
        disabled = _result(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
        return ControllerResult([], CreateAclsResponse(results=[disabled for _ in req.creations]))
    creations = [binding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                         c.operation, c.permission_type) for c in req.creations]
    records, results = create_acls(cctx.image.acls, creations, cctx.controller.rng)
    return ControllerResult(records, CreateAclsResponse(results=[_result(r.code, r.message) for r in results]))
