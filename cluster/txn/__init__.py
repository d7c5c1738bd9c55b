"""The transaction coordinator (KIP-98/447/664/890) as pure state machines: ``txn_metadata`` (one transactional
id's state and its transitions), ``txn_log`` (``__transaction_state`` records) and ``txn_coordinator`` (one
``__transaction_state`` partition: the APIs, the markers to send, the timers, load by replay)."""
