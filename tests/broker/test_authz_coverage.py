"""Every API a node serves has a row in an authorization test: the rows (API key -> the Kafka check it ports) live
beside the tests that send each request without and with its minimal ACL (tests/integration/test_authz_data.py,
test_authz_groups.py, test_acl_admin.py, test_authz_controller.py), and this test fails for a handler in either
table without one, so a new handler cannot arrive unauthorized."""

import re

from broker.apis import HANDLERS
from broker.apis.forwarding import FORWARDED
from broker.controlplane.controller_listener import CONTROLLER_LISTENER_HANDLERS
from tests.integration import test_acl_admin, test_authz_controller, test_authz_data, test_authz_groups

BROKER_ROWS = {**test_authz_data.ROWS, **test_authz_groups.ROWS, **test_acl_admin.ROWS}
CONTROLLER_ROWS = {**test_authz_controller.ROWS, **test_acl_admin.ROWS}


def test_every_broker_api_has_an_authorization_row():
    # a forwarded request is checked at the controller, as the envelope's principal: its row is the controller's
    rows = set(BROKER_ROWS) | (set(FORWARDED) & set(CONTROLLER_ROWS))
    missing = sorted(set(HANDLERS) - rows)
    assert not missing, f"broker APIs without an authorization row: {missing}"


def test_every_controller_listener_api_has_an_authorization_row():
    missing = sorted(set(CONTROLLER_LISTENER_HANDLERS) - set(CONTROLLER_ROWS))
    assert not missing, f"controller listener APIs without an authorization row: {missing}"


def test_every_row_cites_the_kafka_code_it_ports():
    """Each row opens with the Kafka class (KafkaApis, ControllerApis, AclApis, a request handler) whose check it
    ports, then what that check is."""
    for rows in (BROKER_ROWS, CONTROLLER_ROWS):
        for key, citation in rows.items():
            assert re.match(r"[A-Z][A-Za-z]+[.:/ ]", citation) and ":" in citation, (key, citation)
