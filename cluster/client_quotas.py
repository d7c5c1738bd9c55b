"""Client quotas in the metadata (KIP-546): what AlterClientQuotas commits (Kafka's ClientQuotaControlManager) and
what DescribeClientQuotas answers from an image (ClientQuotasImage.describe). Pure.

Entities are ``user`` and/or ``client-id`` (a None name is the default entity), or ``ip`` alone. Keys and their
types are QuotaConfig's: ``producer_byte_rate`` and ``consumer_byte_rate`` (LONG: no fractions),
``request_percentage`` and ``controller_mutation_rate`` (DOUBLE) for users and client ids,
``connection_creation_rate`` (INT) for IPs. Values must be positive; a null value removes the key. One entity's
error leaves the other entities' changes in the request. An ``ip`` must be an address literal (Kafka would also
resolve a host name: no network here).
"""

from __future__ import annotations

import ipaddress

from protocol.errors import ErrorCode
from protocol.generated.messages import (
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
)
from protocol.generated.messages import alter_client_quotas_response as alter_resp
from protocol.generated.messages import describe_client_quotas_response as describe_resp
from protocol.generated.metadata import ClientQuotaRecord
from protocol.generated.metadata.client_quota_record import EntityData
from protocol.message import Message

from cluster.metadata_image import MetadataImage, QuotaEntity, quota_entity

USER, CLIENT_ID, IP = "user", "client-id", "ip"
LONG, INT, DOUBLE = "LONG", "INT", "DOUBLE"
USER_AND_CLIENT_KEYS = {"producer_byte_rate": LONG, "consumer_byte_rate": LONG, "request_percentage": DOUBLE,
                        "controller_mutation_rate": DOUBLE}
IP_KEYS = {"connection_creation_rate": INT}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_MAX = {INT: 2**31 - 1, LONG: 2**63 - 1}


class QuotaRequestError(ValueError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _entity(entry) -> tuple[QuotaEntity | None, tuple[int, str] | None]:
    """ClientQuotaControlManager.validateEntity and configKeysForEntityType."""
    seen: dict[str, str | None] = {}
    if not entry.entity:
        return None, (ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    for e in entry.entity:
        if e.entity_type in seen:
            return None, (ErrorCode.INVALID_REQUEST, f"Invalid client quota entity, duplicate entity entry "
                                                     f"{e.entity_type}")
        if e.entity_type not in (USER, CLIENT_ID, IP):
            return None, (ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {e.entity_type}")
        if e.entity_name is not None and e.entity_name == "":
            return None, (ErrorCode.INVALID_REQUEST, f"Empty {e.entity_type} not supported")
        seen[e.entity_type] = e.entity_name
    if IP in seen:
        if len(seen) > 1:
            return None, (ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity shouldnot be "
                                                     "combined with User or ClientId")
        if seen[IP] is not None:
            try:
                ipaddress.ip_address(seen[IP])
            except ValueError:
                return None, (ErrorCode.INVALID_REQUEST, f"{seen[IP]} is not a valid IP or resolvable host.")
    return quota_entity(seen.items()), None


def _check_value(keys: dict[str, str], key: str, value: float) -> tuple[int, str] | None:
    """ClientQuotaControlManager.validateQuotaKeyValue."""
    kind = keys.get(key)
    if kind is None:
        return ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}"
    if value <= 0.0:
        return ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0"
    if kind in _MAX:
        if value > _MAX[kind]:
            size = "an INT" if kind == INT else "a LONG"
            return ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for {size}."
        if abs(value % 1.0) > 1e-6:
            return ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value."
    return None


def alter_client_quotas(image: MetadataImage, req: AlterClientQuotasRequest
                        ) -> tuple[list[Message], AlterClientQuotasResponse]:
    """(records, response) for one AlterClientQuotas (ClientQuotaControlManager.alterClientQuotas); with
    ``validate_only`` the records are not returned."""
    records: list[Message] = []
    results = []
    done: set[QuotaEntity] = set()
    for entry in req.entries:
        entity, error = _entity(entry)
        if error is None and entity in done:
            error = (ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {dict(entity)}")
        ops: dict[str, float | None] = {}
        for op in entry.ops if error is None else ():
            if op.key in ops:
                error = (ErrorCode.INVALID_REQUEST, f"Duplicate quota key {op.key} not updating quota for this "
                                                    f"entity")
                break
            ops[op.key] = None if op.remove else op.value
        if error is None:
            new, error = _changes(image, entity, ops)
            if error is None:
                records.extend(new)
                done.add(entity)
        code, message = error if error is not None else (0, None)
        results.append(alter_resp.EntryData(error_code=code, error_message=message, entity=[
            alter_resp.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]))
    return ([] if req.validate_only else records), AlterClientQuotasResponse(entries=results)


def _changes(image: MetadataImage, entity: QuotaEntity, ops: dict[str, float | None]
             ) -> tuple[list[Message], tuple[int, str] | None]:
    """One entity's records (ClientQuotaControlManager.alterClientQuotaEntity): changed values only, removals of
    keys it has."""
    keys = IP_KEYS if entity[0][0] == IP else USER_AND_CLIENT_KEYS
    current = image.client_quotas.get(entity, {})
    new: list[Message] = []
    for key, value in ops.items():
        if value is None:
            if key in current:
                new.append(ClientQuotaRecord(entity=_record_entity(entity), key=key, value=0.0, remove=True))
            continue
        error = _check_value(keys, key, value)
        if error is not None:
            return [], error
        if current.get(key) != value:
            new.append(ClientQuotaRecord(entity=_record_entity(entity), key=key, value=value))
    return new, None


def _record_entity(entity: QuotaEntity) -> list[EntityData]:
    return [EntityData(entity_type=t, entity_name=n) for t, n in entity]


def describe_client_quotas(image: MetadataImage, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    """ClientQuotasImage.describe: entities matching every filter component (exact name, the default, or any
    name of the type); ``strict``: no other entity types."""
    try:
        exact, typed = _filter(req)
    except QuotaRequestError as exc:
        return DescribeClientQuotasResponse(error_code=exc.code, error_message=str(exc), entries=None)
    entries = []
    for entity, values in image.client_quotas.items():
        parts = dict(entity)
        if req.strict and len(parts) != len(exact) + len(typed):
            continue
        if any(t not in parts or parts[t] != name for t, name in exact.items()) or any(t not in parts for t in typed):
            continue
        entries.append(describe_resp.EntryData(
            entity=[describe_resp.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[describe_resp.ValueData(key=k, value=v) for k, v in sorted(values.items())]))
    return DescribeClientQuotasResponse(error_code=0, error_message=None, entries=entries)


def _filter(req: DescribeClientQuotasRequest) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in req.components:
        if not c.entity_type:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in typed:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Entity type {c.entity_type} cannot appear more "
                                                               f"than once in the filter.")
        if c.entity_type not in (IP, USER, CLIENT_ID):
            raise QuotaRequestError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set "
                                                                   "match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but also "
                                                                   "specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_SPECIFIED, but "
                                                                   "also specified a match string.")
            typed.add(c.entity_type)
        else:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
        raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                                           "component should not be used with user or clientId "
                                                           "filter component.")
    return exact, typed
