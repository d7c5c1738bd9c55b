"""Requests for the active controller arriving on the controller listener: brokers' own controller RPCs and
Envelopes of forwarded client requests. The connection's principal is authorized first, on any controller, for
the API's CLUSTER operation (an Envelope: CLUSTER_ACTION; broker/controlplane/controller_authorization.py), as
ControllerApis does before it asks the controller; refused: CLUSTER_AUTHORIZATION_FAILED in the request's error
shape. Then run here while this node is the active controller; NOT_CONTROLLER otherwise, so the sender finds the
new one (ControllerApis); REQUEST_TIMED_OUT for one that waited past its deadline and was not decided."""

from __future__ import annotations

import asyncio
import logging

from broker.controlplane.controller_authorization import (
    CLUSTER_OPERATION, cluster_authorization_failed, error_response,
)
from broker.quorum.raft_driver import NotLeaderError
from cluster.authorizer import AuthorizerNotReady
from protocol.errors import ErrorCode
from protocol.generated.api_keys import APIS
from protocol.message import Message

log = logging.getLogger("odradek.controller_listener")
_NOT_READY_LOGGED: set[str] = set()  # principals refused before the ACLs were loaded, said once each


def refused(ctx, body: Message) -> Message | None:
    """The refusal of a request whose connection's principal lacks the API's CLUSTER operation; None: allowed.
    Before the node has loaded its first image only super users are answered (AuthorizerNotReadyException, which
    Kafka answers as UNKNOWN_SERVER_ERROR): the nodes' own principals must be super users (KIP-801)."""
    operation = CLUSTER_OPERATION.get(body.API_KEY)
    try:
        if operation is None or ctx.authorize_cluster(operation):
            return None
    except AuthorizerNotReady:
        if ctx.principal not in _NOT_READY_LOGGED and len(_NOT_READY_LOGGED) < 100:
            _NOT_READY_LOGGED.add(ctx.principal)
            log.warning("%s from %s (%s) refused: the authorizer has no ACLs before this node has the metadata, so "
                        "only super.users are answered; a node's principal must be one or the quorum never forms "
                        "(KIP-801)", type(body).__name__, ctx.principal, ctx.client_host)
        return error_response(body, ctx.version, ErrorCode.UNKNOWN_SERVER_ERROR, "The authorizer is not ready yet")
    return cluster_authorization_failed(body, ctx.version, ctx.principal)


async def run_on_active_controller(ctx, body: Message) -> Message:
    denied = refused(ctx, body)
    if denied is not None:
        return denied
    channel = ctx.controller
    response_type = APIS[body.API_KEY].response
    if not channel.quorum.is_active:
        return response_type(error_code=ErrorCode.NOT_CONTROLLER)
    try:
        if body.API_KEY == 58:  # Envelope
            return await channel.handle_envelope(body)
        return await channel.decide(body, ctx.version, principal=ctx.principal, client_host=ctx.client_host,
                                    client_id=getattr(ctx, "client_id", None))
    except NotLeaderError as exc:
        log.info("%s: %s", type(body).__name__, exc)
        return response_type(error_code=ErrorCode.NOT_CONTROLLER)
    except asyncio.TimeoutError as exc:  # it waited past its deadline behind other decisions: not decided
        log.info("%s: %s", type(body).__name__, exc)
        return response_type(error_code=ErrorCode.REQUEST_TIMED_OUT)
    except AuthorizerNotReady as exc:  # a handler's per-resource check before the first image was loaded
        return error_response(body, ctx.version, ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
