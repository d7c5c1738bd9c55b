"""The controller listener's refusals (broker/controlplane/controller_authorization.py): every API it serves and
every one a broker forwards has a refusal in its own shape that encodes at each version served (a field Kafka's
getErrorResponse leaves unset must still be valid on the wire), carrying the error where the shape has one."""

from __future__ import annotations

import pytest

from broker.apis import HANDLERS
from broker.apis.forwarding import FORWARDED
from broker.controlplane.controller_authorization import CLUSTER_OPERATION, error_response
from broker.controlplane.controller_listener import CONTROLLER_LISTENER_HANDLERS
from protocol.errors import ErrorCode
from protocol.generated.api_keys import APIS

REFUSABLE = sorted(set(CLUSTER_OPERATION) | set(FORWARDED) | {19, 20, 33, 37, 44})


TOP_LEVEL_ERROR_SINCE = {43: 1}  # ElectLeaders v0 has per-partition errors only


def _versions(key: int) -> range:
    """The versions the controller listener serves, and those a broker forwards at."""
    ranges = [t[key].versions for t in (CONTROLLER_LISTENER_HANDLERS, HANDLERS)
              if key in t and (t is CONTROLLER_LISTENER_HANDLERS or key in FORWARDED or key in (33, 44))]
    return range(min(lo for lo, _ in ranges), max(hi for _, hi in ranges) + 1)


@pytest.mark.parametrize("key", REFUSABLE)
def test_a_refusal_encodes_at_every_version_served(key):
    spec = APIS[key]
    for version in _versions(key):
        response = error_response(spec.request(), version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "refused")
        assert isinstance(response, spec.response)
        decoded = spec.response.decode(memoryview(response.encode(version)), version)
        if hasattr(decoded, "error_code") and key not in (19, 20, 33, 37, 44, 49, 51) and \
                version >= TOP_LEVEL_ERROR_SINCE.get(key, 0):
            assert decoded.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, (key, version, decoded)


def _items(key: int, response) -> list[int]:
    """The per-item error codes of a refusal (topic, partition, resource, entry, user)."""
    if key == 43:
        return [p.error_code for t in response.replica_election_results for p in t.partition_result]
    if key == 45:
        return [p.error_code for t in response.responses for p in t.partitions]
    field = {19: "topics", 20: "responses", 33: "responses", 37: "results", 44: "responses", 49: "entries",
             51: "results"}[key]
    return [i.error_code for i in getattr(response, field)]


def _named(key: int):
    from protocol.generated import messages as m
    from protocol.generated.messages import (
        alter_client_quotas_request as acq, alter_configs_request as ac, alter_partition_reassignments_request as apr,
        alter_user_scram_credentials_request as auc, create_partitions_request as cp, create_topics_request as ct,
        delete_topics_request as dt, elect_leaders_request as el, incremental_alter_configs_request as iac,
    )
    return {
        19: lambda: m.CreateTopicsRequest(topics=[ct.CreatableTopic(name=n) for n in "ab"]),
        20: lambda: m.DeleteTopicsRequest(topics=[dt.DeleteTopicState(name=n) for n in "ab"], topic_names=["a", "b"]),
        33: lambda: m.AlterConfigsRequest(resources=[ac.AlterConfigsResource(resource_type=2, resource_name=n)
                                                     for n in "ab"]),
        37: lambda: m.CreatePartitionsRequest(topics=[cp.CreatePartitionsTopic(name=n, assignments=None)
                                                      for n in "ab"]),
        43: lambda: m.ElectLeadersRequest(topic_partitions=[el.TopicPartitions(topic="a", partitions=[0, 1])]),
        44: lambda: m.IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(resource_type=2,
                                                                                          resource_name=n)
                                                                for n in "ab"]),
        45: lambda: m.AlterPartitionReassignmentsRequest(topics=[apr.ReassignableTopic(name="a", partitions=[
            apr.ReassignablePartition(partition_index=i, replicas=[1]) for i in (0, 1)])]),
        49: lambda: m.AlterClientQuotasRequest(entries=[acq.EntryData(entity=[acq.EntityData(entity_type="user",
                                                                                             entity_name=n)])
                                                        for n in "ab"]),
        51: lambda: m.AlterUserScramCredentialsRequest(deletions=[auc.ScramCredentialDeletion(name="a")],
                                                       upsertions=[auc.ScramCredentialUpsertion(name="b")]),
    }[key]()


@pytest.mark.parametrize("key", [19, 20, 33, 37, 43, 44, 45, 49, 51])
def test_a_refusal_names_each_item_of_the_request(key):
    spec = APIS[key]
    for version in _versions(key):
        response = error_response(_named(key), version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "refused")
        decoded = spec.response.decode(memoryview(response.encode(version)), version)
        assert _items(key, decoded) == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2, (key, version, decoded)


def test_before_the_acls_are_loaded_a_node_not_among_the_super_users_is_refused_and_told_why(caplog):
    """StandardAuthorizer answers only super users before its first image: the controller listener answers
    UNKNOWN_SERVER_ERROR (Kafka's AuthorizerNotReadyException) and says once why the quorum cannot form."""
    import logging

    from broker.controlplane.controller_listener.controller_rpc import refused
    from cluster.authorizer import AuthorizerNotReady
    from protocol.generated.messages import VoteRequest

    class Ctx:
        principal, client_host, version = "User:CN=peer-without-rights", "10.0.0.2", 2

        @staticmethod
        def authorize_cluster(operation):
            raise AuthorizerNotReady("The authorizer is not ready yet")

    caplog.set_level(logging.WARNING, "odradek.controller_listener")
    answers = [refused(Ctx, VoteRequest(cluster_id="c", topics=[])) for _ in range(3)]
    assert [a.error_code for a in answers] == [ErrorCode.UNKNOWN_SERVER_ERROR] * 3
    said = [r.getMessage() for r in caplog.records if "User:CN=peer-without-rights" in r.getMessage()]
    assert len(said) == 1 and "super.users" in said[0]
