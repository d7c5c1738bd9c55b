# The two README commands: `make run` and `make test`. Everything else is a helper for those.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Compiled modules are cached (__pycache__/, git-ignored) even where the environment sets PYTHONDONTWRITEBYTECODE:
# a node imports ~300 modules, and compiling them again costs each process start ~0.8 s (tests start hundreds)
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test soak docker-test generate bench cc kcat java iproute2 venv venv-test clean

$(VENV)/bin/python:
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel

# setup.py compiles protocol/_record_columns.c (optional: without a compiler the pure-Python builder runs)
$(VENV)/.installed: pyproject.toml setup.py protocol/_record_columns.c | $(VENV)/bin/python
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml setup.py protocol/_record_columns.c | $(VENV)/bin/python
	$(PIP) install -q -e '.[test,spark]'
	touch $(VENV)/.installed $@

venv: $(VENV)/.installed
venv-test: $(VENV)/.installed-test

## run one broker in the foreground on 127.0.0.1:9092, data under ./data
run: venv
	$(VENV)/bin/odradek serve --config config/single-node.yaml

cc:  # pip compiles protocol/_record_columns.c (optional for an install; the tests check it was built)
	@command -v cc >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq gcc; }

kcat:
	@command -v kcat >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq kcat; }

iproute2:  # the network-partition tests build Linux network namespaces with `ip netns`
	@command -v ip >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq iproute2; }

docker-compose:  # tests/integration/test_compose.py validates docker/compose*.yaml with Debian's docker-compose (no daemon)
	@command -v docker-compose >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq docker-compose; }

java:  # the PySpark tests need a JVM
	@command -v java >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq openjdk-17-jre-headless; }

## create/update .venv with the test extras, install kcat (and a JVM for Spark) if missing, run the suite
# the pure-Python unit tests, the in-process broker and group tests, the single-broker client tests (also those
# that kill and restart their one `odradek serve` process: restarts, bad storage, the cleaner through a kill) and the
# Spark package's tests that start no Spark run on both cores (pytest-xdist): no clusters, no faults timed against each
# other; everything else after them, one test at a time (clusters of processes, fault injection, Spark). PYTEST_ARGS
# go to both runs.
PARALLEL_TESTS := tests/protocol tests/storage tests/cluster tests/share tests/sim tests/test_layering.py tests/test_readme_layout.py tests/test_skip_policy.py \
	tests/broker tests/groups tests/jepsen \
	$(addprefix tests/integration/,test_aiokafka.py test_authz_data.py test_authz_groups.py test_bad_input.py test_confluent_kafka.py test_kafka_python.py \
	  test_kafkajs.py test_kcat.py test_quotas.py test_read_committed_aborted.py test_sasl.py test_transactions.py \
	  test_transactions_observed.py test_tls.py test_zero_copy.py test_transactional_offsets.py test_share_consumer.py \
	  test_connection_quotas.py test_elect_leaders.py test_restart.py test_bad_storage.py test_txn_compaction.py) \
	$(addprefix tests/spark_jobs/,test_scan.py test_worker_python.py test_partition_pass.py)
# the in-process (EmbeddedBroker, tests/authz_harness.py) tests of modules whose other tests run clusters, and the
# compose file checks and other commands refused before a node starts (docker-compose config, refused overrides), by
# node id prefix: on both cores too (the one-at-a-time run deselects them)
PARALLEL_NODES := $(addprefix tests/integration/,\
	test_compose.py::test_docker_compose_accepts_the_file \
	test_acl_admin.py::test_describe_acls_needs_describe_on_the_cluster \
	test_acl_admin.py::test_create_acls_needs_alter_on_the_cluster \
	test_acl_admin.py::test_delete_acls_needs_alter_on_the_cluster \
	test_acl_admin.py::test_an_acl_made_through_the_api_changes_what_the_authorizer_answers \
	test_acl_admin.py::test_bad_creations_get_invalid_request_and_commit_nothing \
	test_acl_admin.py::test_an_identical_acl_is_one_acl_and_both_creations_succeed \
	test_acl_admin.py::test_unknown_wire_codes_fail_parsing_and_close_the_connection \
	test_acl_admin.py::test_without_an_authorizer_every_acl_api_answers_security_disabled \
	test_acl_admin.py::test_kafka_python_admin_creates_describes_and_deletes_acls \
	test_acl_admin.py::test_confluent_kafka_admin_creates_describes_and_deletes_acls \
	test_authz_controller.py::test_rows_cover_every_api_of_the_controller_listener_and_every_forwarded_one \
	test_authz_controller.py::test_without_and_with_the_minimal_acl \
	test_authz_controller.py::test_a_refused_create_or_delete_changes_nothing \
	test_authz_controller.py::test_a_topic_named_by_id_is_named_back_only_to_whom_may_describe_it \
	test_authz_controller.py::test_create_on_the_cluster_and_describe_configs_on_the_topic_return_its_configs \
	test_authz_controller.py::test_a_broker_resource_needs_alter_configs_on_the_cluster \
	test_authz_controller.py::test_a_broker_logger_needs_alter_configs_on_the_cluster \
	test_authz_controller.py::test_the_sasl_exchange_and_api_versions_need_no_acl \
	test_authz_controller.py::test_an_envelope_needs_cluster_action_and_its_request_runs_as_the_envelope_principal \
	test_authz_controller.py::test_a_client_cannot_register_a_broker_or_vote \
	test_authz_controller.py::test_a_plaintext_controller_listener_is_anonymous_and_anonymous_is_a_super_user \
	test_dev_cluster.py::test_dev_cluster_refuses_an_override_its_type_cannot_parse \
	test_compose.py::test_the_compose_files_follow_the_issue \
	test_compose.py::test_container_run_refuses_bad_input_naming_the_conflict \
	test_fetch_sessions.py::test_sessions_on_the_wire \
	test_fetch_sessions.py::test_kafka_python_consumer_uses_incremental_fetch_sessions \
	test_fetch_sessions.py::test_confluent_kafka_consumer_keeps_working \
	test_transactions_v2.py::test_the_same_transactions_at_transaction_version \
	test_transactions_v2.py::test_kafka_17754_a_delayed_end_txn \
	test_transactions_v2.py::test_tv2_requests_where_they_do_not_belong_get_kafkas_errors_and_change_nothing)

# the Spark tests (one JVM, CPU-bound) run beside the one-at-a-time cluster tests, which mostly wait on timers and
# leave the cores idle, and after them, still beside, the cluster tests that time no fault against a failover
# (clients over every security protocol, the dev and compose clusters, ACLs and authorization between nodes, bad
# quorum input, metadata snapshots, fetch from a follower, a reassignment), one at a time: their output follows the
# cluster tests' (a cluster test's timing must hold under load anyway)
BESIDE_TESTS := $(addprefix tests/integration/,test_security_clients.py test_security_cluster.py test_dev_cluster.py \
	test_compose.py test_acl_admin.py test_authz_cluster.py test_authz_controller.py test_quorum_bad_input.py \
	test_quorum_snapshots.py test_fetch_from_follower.py test_reassignment.py)
SPARK_TMP := $(CURDIR)/.pytest-spark-tmp
BESIDE_TMP := $(CURDIR)/.pytest-beside-tmp
SPARK_LOG := $(CURDIR)/.pytest-spark.log
test: cc venv-test kcat java iproute2 docker-compose
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n 2 $(PARALLEL_TESTS) $(PARALLEL_NODES) $(PYTEST_ARGS); unit=$$?; \
	{ $(PY) -m pytest -p no:cacheprovider --basetemp=$(SPARK_TMP) tests/spark_jobs \
	  $(foreach t,$(filter tests/spark_jobs/%,$(PARALLEL_TESTS)),--ignore=$(t)) --durations=10 $(PYTEST_ARGS); s=$$?; \
	  $(PY) -m pytest -p no:cacheprovider --basetemp=$(BESIDE_TMP) $(BESIDE_TESTS) \
	  $(foreach t,$(PARALLEL_NODES),--deselect=$(t)) --durations=20 $(PYTEST_ARGS); b=$$?; \
	  [ $$s = 0 ] && [ $$b = 0 ]; } >$(SPARK_LOG) 2>&1 & spark=$$!; \
	$(PY) -m pytest $(foreach t,$(PARALLEL_TESTS) $(BESIDE_TESTS),--ignore=$(t)) \
	  $(foreach t,$(PARALLEL_NODES),--deselect=$(t)) --ignore=tests/spark_jobs --durations=40 $(PYTEST_ARGS); rest=$$?; \
	wait $$spark; sparkrc=$$?; echo "== the Spark tests, then BESIDE_TESTS, run beside the cluster tests:"; \
	cat $(SPARK_LOG); \
	[ $$unit = 0 ] && [ $$rest = 0 ] && [ $$sparkrc = 0 ]

## the long profiles, run by hand (not in CI): Raft simulation seeds, controller kills, the quorum and replication
## tests on both topologies, replication faults (also under transactions, with network partitions too), exactly-once
## through 20 kills of a transactional app (EOS), a damaged log dir of 10,000 partitions, the transaction-aware cleaner
## through kills, 20 s of SASL re-authentication on a secured cluster, the compaction report on a local Spark cluster
soak: venv-test iproute2
	ODRADEK_SOAK=1 $(PY) -m pytest -s -m soak tests/sim
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_quorum_cluster.py
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_replication.py
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_controller_failover.py
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_scale_rejoin.py
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_scale_failover.py
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_replication_faults.py
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_netns_partitions.py -k transactions
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_eos_faults.py
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_security_clients.py -k reauthentication
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_bad_storage.py -k damaged
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_txn_compaction.py
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_transactions_cluster.py -k "each_clients or lost_markers"
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_transactions_v2.py -k three_nodes
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_share_coordinator_cluster.py
	ODRADEK_SOAK=1 $(PY) -m pytest -s tests/integration/test_share_faults.py
	ODRADEK_SOAK=1 $(PY) -m pytest -s -m soak tests/spark_jobs

## build docker/Dockerfile and run docker/compose.yaml's cluster for real on this machine (by hand, not in
## `make test`): dockerd without its bridge, a debootstrap base image, host networking on 127.0.0.1
docker-test: venv-test kcat
	$(PY) docker/docker_test.py

## regenerate the protocol codec from ../shared/kafka-spec
generate: venv
	$(PY) -m protocol.codegen

bench: venv-test
	$(PY) benchmarks/bench_codec.py
	$(PY) benchmarks/bench_records.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
