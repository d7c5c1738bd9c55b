"""A loaded coordinator shard with a counting producer id source, and helpers that play the adapter: commit (or
fail) the writes of a result, acknowledge markers."""

from __future__ import annotations

from cluster.txn.txn_coordinator import Result, TxnConfig, TxnCoordinatorShard
from cluster.txn.txn_metadata import TransactionMetadata, TransactionVersion

NOW = 1_000_000
COORDINATOR_EPOCH = 0
TXN_ID = "known"
PRODUCER_ID = 10
PRODUCER_EPOCH = 1
TXN_TIMEOUT_MS = 1
PRODUCER_ID2 = 11
PARTITIONS = frozenset({("topic1", 0)})


class Harness:
    def __init__(self, level: TransactionVersion = TransactionVersion.TV_0, config: TxnConfig | None = None,
                 num_partitions: int = 1, partition: int = 0, first_pid: int = 0) -> None:
        self.next_pid = first_pid
        self.pids_available = True
        self.shard = TxnCoordinatorShard(partition, config or TxnConfig(transaction_log_num_partitions=num_partitions),
                                         self._producer_id, num_partitions, level)
        self.shard.load(COORDINATOR_EPOCH, [], NOW)
        self.log: list[tuple[bytes, bytes | None]] = []  # every committed record, in order

    def _producer_id(self) -> int | None:
        if not self.pids_available:
            return None
        self.next_pid += 1
        return self.next_pid - 1

    def put(self, md: TransactionMetadata) -> TransactionMetadata:
        self.shard.transactions[md.transactional_id] = md
        return md

    def get(self, txn_id: str = TXN_ID) -> TransactionMetadata:
        return self.shard.transactions[txn_id]

    def settle(self, res: Result, error: int = 0, now: int = NOW, token=None):
        """Report every write of ``res`` (and of what follows) with ``error``; the outcome of ``token`` (or the
        response) and every result seen."""
        results = [res]
        outcome = res.response
        todo = list(res.writes)
        while todo:
            w = todo.pop(0)
            if error == 0:
                self.log += [r.encode() for r in w.records]
            r = self.shard.write_completed(w.write_id, error, now)
            results.append(r)
            todo += r.writes
            for t, out in r.completions:
                if token is not None and t == token:
                    outcome = out
        return outcome, results

    def ack_markers(self, results: list[Result], error: int = 0, now: int = NOW) -> list[Result]:
        """Answer every marker of ``results`` with ``error`` per partition; commit what that writes."""
        out = []
        for res in results:
            for m in res.markers:
                r = self.shard.markers_written(m.transactional_id, m.coordinator_epoch,
                                               dict.fromkeys(m.partitions, error), now)
                out.append(r)
                out += self.settle(r, now=now)[1][1:]
        return out
