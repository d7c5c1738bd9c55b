"""The group coordinator as pure state machines (Kafka's group-coordinator module): one
``GroupCoordinatorShard`` per ``__consumer_offsets`` partition (``group_coordinator``) with its classic groups
(``group_classic``), KIP-848 consumer groups (``group_consumer``) and their assignors (``assignors``), KIP-932 share
groups (``group_share``) and their ``simple`` assignor (``share_assignor``), committed
offsets (``offsets``), the partition's records (``group_records``, ``group_record_helpers``) and the coordinator's
configuration (``group_config``). broker/groups/group_service.py runs them over the log and the event loop.
"""
