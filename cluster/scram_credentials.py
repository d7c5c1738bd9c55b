"""SCRAM credentials in the metadata (KIP-554): what AlterUserScramCredentials commits (Kafka's
ScramControlManager.alterCredentials) and what DescribeUserScramCredentials answers from an image
(ScramImage.describe). Pure: the controller handler and the broker handler call these.

Upsertions carry the client's salted password (Hi(password, salt, i)); the controller keeps only the stored key and
server key derived from it, as Kafka's does. Iterations must be 4096-16384; a user altered twice in one request,
an empty name or an unknown mechanism is refused per user; deleting a credential that does not exist is
RESOURCE_NOT_FOUND; the rest of the request still commits.
"""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.generated.messages import (
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from protocol.generated.messages.alter_user_scram_credentials_response import AlterUserScramCredentialsResult
from protocol.generated.messages.describe_user_scram_credentials_response import (
    CredentialInfo, DescribeUserScramCredentialsResult,
)
from protocol.generated.metadata import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from protocol.message import Message
from protocol.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism, credential_from_salted_password

from cluster.metadata_image import MetadataImage

TWICE = "A user credential cannot be altered twice in the same request"
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
DESCRIBE_DUPLICATE = "Cannot describe SCRAM credentials for the same user twice in a single request: "


def _mechanism(code: int) -> ScramMechanism:
    return ScramMechanism(code) if code in (1, 2) else ScramMechanism.UNKNOWN


def _check_name_and_mechanism(name: str, mechanism: ScramMechanism) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism is ScramMechanism.UNKNOWN:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def alter_credentials(image: MetadataImage, req: AlterUserScramCredentialsRequest
                      ) -> tuple[list[Message], AlterUserScramCredentialsResponse]:
    """(records, response) for one AlterUserScramCredentials request (ScramControlManager.alterCredentials)."""
    deletions: dict[str, object] = {}
    upserts: dict[str, object] = {}
    errors: dict[str, tuple[int, str]] = {}
    for d in req.deletions:
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = (ErrorCode.DUPLICATE_RESOURCE, TWICE)
            continue
        problem = _check_name_and_mechanism(d.name, _mechanism(d.mechanism))
        if problem is None and (d.name, d.mechanism) not in image.scram_credentials:
            problem = ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        if problem is not None:
            errors[d.name] = problem
        else:
            deletions[d.name] = d
    for u in req.upsertions:
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            errors[u.name] = (ErrorCode.DUPLICATE_RESOURCE, TWICE)
            continue
        problem = _check_name_and_mechanism(u.name, _mechanism(u.mechanism))
        if problem is None and u.iterations < MIN_ITERATIONS:
            problem = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        elif problem is None and u.iterations > MAX_ITERATIONS:
            problem = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if problem is not None:
            errors[u.name] = problem
        else:
            upserts[u.name] = u
    records: list[Message] = []
    results = []
    for d in deletions.values():
        results.append(AlterUserScramCredentialsResult(user=d.name, error_code=0, error_message=None))
        records.append(RemoveUserScramCredentialRecord(name=d.name, mechanism=d.mechanism))
    for u in upserts.values():
        c = credential_from_salted_password(ScramMechanism(u.mechanism), bytes(u.salted_password), bytes(u.salt),
                                            u.iterations)
        records.append(UserScramCredentialRecord(name=u.name, mechanism=u.mechanism, salt=c.salt,
                                                 stored_key=c.stored_key, server_key=c.server_key,
                                                 iterations=u.iterations))
        results.append(AlterUserScramCredentialsResult(user=u.name, error_code=0, error_message=None))
    for user, (code, message) in errors.items():
        results.append(AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message))
    return records, AlterUserScramCredentialsResponse(results=results)


def describe_credentials(image: MetadataImage, req: DescribeUserScramCredentialsRequest
                         ) -> DescribeUserScramCredentialsResponse:
    """ScramImage.describe: every user when none is named; a user named twice is DUPLICATE_RESOURCE, one
    without credentials RESOURCE_NOT_FOUND; iterations only, never keys."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (user, mechanism), c in sorted(image.scram_credentials.items()):
        by_user.setdefault(user, []).append((mechanism, c.iterations))
    if not req.users:
        asked = {user: False for user in by_user}
    else:
        asked = {}
        for u in req.users:
            asked[u.name] = u.name in asked
    results = []
    for user, twice in asked.items():
        if twice:
            results.append(DescribeUserScramCredentialsResult(
                user=user, error_code=ErrorCode.DUPLICATE_RESOURCE, error_message=DESCRIBE_DUPLICATE + user))
        elif user in by_user:
            results.append(DescribeUserScramCredentialsResult(user=user, error_code=0, credential_infos=[
                CredentialInfo(mechanism=m, iterations=i) for m, i in by_user[user]]))
        else:
            results.append(DescribeUserScramCredentialsResult(
                user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND, error_message=DESCRIBE_MISSING + user))
    return DescribeUserScramCredentialsResponse(error_code=0, results=results)
