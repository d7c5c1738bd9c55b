"""cluster/scram_credentials.py: ScramControlManagerTest's alterCredentials cases and ScramImageTest's describe:
per-user errors (duplicates, empty names, unknown mechanisms, iterations outside 4096-16384, deleting what does not
exist) beside users that commit; keys derived from the salted password; describe never shows keys."""

from __future__ import annotations

from cluster.metadata_image import MetadataImage
from cluster.scram_credentials import alter_credentials, describe_credentials
from protocol.errors import ErrorCode
from protocol.generated.messages import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from protocol.generated.messages.alter_user_scram_credentials_request import (
    ScramCredentialDeletion, ScramCredentialUpsertion,
)
from protocol.generated.messages.describe_user_scram_credentials_request import UserName
from protocol.generated.metadata import UserScramCredentialRecord
from protocol.scram import ScramMechanism, credential, salted_password

SHA256, SHA512 = int(ScramMechanism.SCRAM_SHA_256), int(ScramMechanism.SCRAM_SHA_512)


def upsert(name, mechanism=SHA256, iterations=8192, password="pw") -> ScramCredentialUpsertion:
    salt = b"0123456789abcdef"
    return ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                                    salted_password=salted_password(ScramMechanism(mechanism) if mechanism in (1, 2)
                                                                    else ScramMechanism.SCRAM_SHA_256, password,
                                                                    salt, max(iterations, 1)))


def results(response) -> dict:
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def test_upsertions_commit_the_keys_a_server_needs_and_bad_users_are_refused_alone():
    image = MetadataImage()
    records, response = alter_credentials(image, AlterUserScramCredentialsRequest(deletions=[], upsertions=[
        upsert("alice"), upsert("bob", SHA512, 4096), upsert("", SHA256), upsert("carol", 3),
        upsert("dave", iterations=4095), upsert("erin", iterations=16385), upsert("frank"), upsert("frank"),
    ]))
    assert results(response) == {
        "alice": (0, None), "bob": (0, None),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "carol": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "dave": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "erin": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "frank": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
    }
    assert [(r.name, r.mechanism) for r in records] == [("alice", SHA256), ("bob", SHA512)]
    expected = credential(ScramMechanism.SCRAM_SHA_256, "pw", b"0123456789abcdef", 8192)
    assert (records[0].stored_key, records[0].server_key, records[0].salt) == \
        (expected.stored_key, expected.server_key, expected.salt)
    assert all(b"pw" not in bytes(r.encode(0)) for r in records)


def test_deleting_a_missing_credential_is_resource_not_found_and_deleting_one_that_exists_commits():
    image = MetadataImage().apply([UserScramCredentialRecord(name="alice", mechanism=SHA256, salt=b"s",
                                                             stored_key=b"k", server_key=b"v", iterations=4096)], 1)
    records, response = alter_credentials(image, AlterUserScramCredentialsRequest(upsertions=[], deletions=[
        ScramCredentialDeletion(name="alice", mechanism=SHA256),
        ScramCredentialDeletion(name="alice2", mechanism=SHA256),
        ScramCredentialDeletion(name="bob", mechanism=SHA512)]))
    assert results(response)["alice"] == (0, None)
    assert results(response)["bob"][0] == results(response)["alice2"][0] == ErrorCode.RESOURCE_NOT_FOUND
    assert [(type(r).__name__, r.name) for r in records] == [("RemoveUserScramCredentialRecord", "alice")]
    image = image.apply(records, 2)
    assert not image.scram_credentials


def test_a_user_deleted_and_upserted_in_one_request_is_a_duplicate():
    image = MetadataImage().apply([UserScramCredentialRecord(name="alice", mechanism=SHA256, salt=b"s",
                                                             stored_key=b"k", server_key=b"v", iterations=4096)], 1)
    records, response = alter_credentials(image, AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name="alice", mechanism=SHA256)], upsertions=[upsert("alice")]))
    assert records == [] and results(response)["alice"][0] == ErrorCode.DUPLICATE_RESOURCE


def test_describe_names_mechanisms_and_iterations_only():
    image = MetadataImage()
    records, _ = alter_credentials(image, AlterUserScramCredentialsRequest(deletions=[], upsertions=[
        upsert("alice"), upsert("bob", SHA512, 4096)]))
    image = image.apply(records, 1)
    everyone = describe_credentials(image, DescribeUserScramCredentialsRequest(users=None))
    assert {r.user: [(c.mechanism, c.iterations) for c in r.credential_infos] for r in everyone.results} == \
        {"alice": [(SHA256, 8192)], "bob": [(SHA512, 4096)]}
    asked = describe_credentials(image, DescribeUserScramCredentialsRequest(users=[
        UserName(name="alice"), UserName(name="zed"), UserName(name="bob"), UserName(name="bob")]))
    got = {r.user: (r.error_code, r.error_message) for r in asked.results}
    assert got["alice"][0] == 0
    assert got["zed"] == (ErrorCode.RESOURCE_NOT_FOUND,
                          "Attempt to describe a user credential that does not exist: zed")
    assert got["bob"] == (ErrorCode.DUPLICATE_RESOURCE,
                          "Cannot describe SCRAM credentials for the same user twice in a single request: bob")
