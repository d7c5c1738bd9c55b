"""cluster/client_quotas.py: ClientQuotaControlManagerTest's validation (entity combinations, keys, types, fractional
byte rates, removals, duplicates, validate_only) and ClientQuotasImageTest's describe filters."""

from __future__ import annotations

import pytest

from cluster.client_quotas import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED, alter_client_quotas, \
    describe_client_quotas
from cluster.metadata_image import MetadataImage
from protocol.errors import ErrorCode
from protocol.generated.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest
from protocol.generated.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from protocol.generated.messages.describe_client_quotas_request import ComponentData


def entry(entity: dict, ops: dict) -> EntryData:
    return EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                     ops=[OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()])


def alter(image, *entries, validate_only=False):
    records, response = alter_client_quotas(image, AlterClientQuotasRequest(entries=list(entries),
                                                                            validate_only=validate_only))
    return records, [(e.error_code, e.error_message) for e in response.entries]


@pytest.mark.parametrize("entity, ops, message", [
    ({}, {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
    ({"user": "a", "ip": "1.2.3.4"}, {"connection_creation_rate": 1.0}, "IP entity shouldnot be combined"),
    ({"group": "g"}, {"producer_byte_rate": 1.0}, "Unhandled client quota entity type: group"),
    ({"user": ""}, {"producer_byte_rate": 1.0}, "Empty user not supported"),
    ({"ip": "not-an-ip"}, {"connection_creation_rate": 1.0}, "not a valid IP"),
    ({"user": "a"}, {"connection_creation_rate": 1.0}, "Invalid configuration key connection_creation_rate"),
    ({"ip": "1.2.3.4"}, {"producer_byte_rate": 1.0}, "Invalid configuration key producer_byte_rate"),
    ({"user": "a"}, {"producer_byte_rate": 0.0}, "must be greater than 0"),
    ({"user": "a"}, {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a fractional value."),
    ({"client-id": "c"}, {"unknown_key": 1.0}, "Invalid configuration key unknown_key"),
])
def test_bad_alterations_are_refused_per_entity_and_commit_nothing(entity, ops, message):
    records, results = alter(MetadataImage(), entry(entity, ops))
    assert records == [] and results[0][0] == ErrorCode.INVALID_REQUEST and message in results[0][1]


def test_good_alterations_commit_changes_only_and_removals_of_keys_present():
    image = MetadataImage()
    records, results = alter(image, entry({"user": "alice", "client-id": None},
                                          {"producer_byte_rate": 1048576.0, "request_percentage": 12.5}),
                             entry({"user": ""}, {"producer_byte_rate": 1.0}))
    assert results == [(0, None), (ErrorCode.INVALID_REQUEST, "Empty user not supported")]
    image = image.apply(records, 1)
    assert dict(image.client_quotas[(("client-id", None), ("user", "alice"))]) == {
        "producer_byte_rate": 1048576.0, "request_percentage": 12.5}
    again, _ = alter(image, entry({"client-id": None, "user": "alice"},
                                  {"producer_byte_rate": 1048576.0, "request_percentage": None,
                                   "consumer_byte_rate": None}))
    assert [(r.key, r.remove) for r in again] == [("request_percentage", True)]
    assert alter(image, entry({"user": "bob"}, {"producer_byte_rate": 5.0}), validate_only=True)[0] == []


def test_a_duplicate_key_or_entity_is_refused():
    _, results = alter(MetadataImage(), entry({"user": "a"}, {"producer_byte_rate": 1.0}),
                       entry({"user": "a"}, {"consumer_byte_rate": 1.0}))
    assert results[0] == (0, None) and results[1][0] == ErrorCode.INVALID_REQUEST


def describe(image, components, strict=False):
    response = describe_client_quotas(image, DescribeClientQuotasRequest(components=components, strict=strict))
    if response.error_code:
        return response.error_code
    return sorted((tuple((e.entity_type, e.entity_name) for e in x.entity) for x in response.entries), key=repr)


def test_describe_filters_as_kafka():
    image = MetadataImage()
    records, _ = alter(image, entry({"user": "alice"}, {"producer_byte_rate": 10.0}),
                       entry({"user": None}, {"producer_byte_rate": 20.0}),
                       entry({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 30.0}),
                       entry({"ip": "10.0.0.1"}, {"connection_creation_rate": 5.0}))
    image = image.apply(records, 1)
    assert describe(image, [ComponentData(entity_type="user", match_type=MATCH_EXACT, match="alice")]) == \
        [(("client-id", "app"), ("user", "alice")), (("user", "alice"),)]
    assert describe(image, [ComponentData(entity_type="user", match_type=MATCH_EXACT, match="alice")],
                    strict=True) == [(("user", "alice"),)]
    assert describe(image, [ComponentData(entity_type="user", match_type=MATCH_DEFAULT, match=None)]) == \
        [(("user", None),)]
    assert len(describe(image, [ComponentData(entity_type="user", match_type=MATCH_SPECIFIED, match=None)])) == 3
    assert describe(image, [ComponentData(entity_type="ip", match_type=MATCH_SPECIFIED, match=None),
                            ComponentData(entity_type="user", match_type=MATCH_SPECIFIED, match=None)]) == \
        ErrorCode.INVALID_REQUEST
    assert describe(image, [ComponentData(entity_type="group", match_type=MATCH_SPECIFIED, match=None)]) == \
        ErrorCode.UNSUPPORTED_VERSION
    assert describe(image, [ComponentData(entity_type="user", match_type=MATCH_EXACT, match=None)]) == \
        ErrorCode.INVALID_REQUEST
