"""Progress of a long job on stderr: a line per finished Spark stage with the records and on-disk bytes its
``kafka-log`` scan tasks read and its MB/s, and a line every ``interval`` seconds while a stage runs.

A poller thread in the driver, not a JVM listener (PySpark cannot register one without py4j's callback server):
stages come from ``SparkContext.statusTracker()``, scan figures from the per-slice counter files the reader writes
into the job's ``statsPath``, each named with its task's stage (complete where executors share the driver's
/tmp, as in local mode, or with ``--stats-dir`` on a shared filesystem; otherwise lines give stages and tasks
only). A stage that begins and ends between two looks is found through its job. Stages shorter than
``min_stage_s`` that scanned nothing are not reported.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import TextIO

__all__ = ["StageProgress"]


class StageProgress:
    def __init__(self, spark_context, stats_dir: str, name: str, *, out: TextIO | None = None,
                 interval: float = 10.0, poll: float = 1.0, min_stage_s: float = 2.0) -> None:
        self.tracker = spark_context.statusTracker()
        self.stats_dir = stats_dir
        self.name = name
        self.out = out or sys.stderr
        self.interval = interval
        self.poll = poll
        self.min_stage_s = min_stage_s
        self.t0 = time.monotonic()
        self._seen: set[str] = set()
        self.records = 0
        self.bytes = 0
        self._running: dict[int, tuple[float, int]] = {}   # stage -> (first seen, tasks)
        self._by_stage: dict[int, tuple[int, int]] = {}    # stage -> (records, bytes) its tasks scanned
        self._reported: set[int] = set()
        self._jobs_done: set[int] = set(self.tracker.getJobIdsForGroup())   # the session's earlier jobs: not ours
        self._last_tick = self.t0
        self._last_line = self.t0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="odradek-progress", daemon=True)

    def start(self) -> "StageProgress":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling and print the job's scan totals."""
        if not self._thread.is_alive():
            return
        self._stop.set()
        self._thread.join()
        self._safe_tick()                # the stages that ended since the last look
        self._scan_totals()
        secs = time.monotonic() - self.t0
        self._say(f"done in {secs:.1f} s: scanned {self._figures(self.records, self.bytes, secs)}")

    # -- internals ----------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            if not self._safe_tick():
                return

    def _safe_tick(self) -> bool:
        """One look; False if it failed (e.g. the session stopping): progress must never fail the job."""
        try:
            self._tick()
            return True
        except Exception:  # noqa: BLE001
            return False

    def _tick(self) -> None:
        now = time.monotonic()
        active = set(self.tracker.getActiveStageIds())
        for sid in active - self._running.keys():
            self._running[sid] = (now, 0)
        for sid in self._finished_unseen(active):      # began and ended between two looks
            self._running[sid] = (self._last_tick, 0)
        self._last_tick = now
        # after the stage list: a task writes its counters before it ends, so a stage seen ended has them all
        self._scan_totals()
        for sid in list(self._running):
            info = self.tracker.getStageInfo(sid)
            if info is not None:
                self._running[sid] = (self._running[sid][0], info.numTasks)
            if sid in active:
                continue
            start, tasks = self._running.pop(sid)
            self._reported.add(sid)
            secs = now - start
            records, nbytes = self._by_stage.pop(sid, (0, 0))
            if records:
                self._say(f"stage {sid} done in {secs:.1f} s ({tasks} tasks): scanned "
                          f"{self._figures(records, nbytes, secs)}")
            elif secs >= self.min_stage_s:
                self._say(f"stage {sid} done in {secs:.1f} s ({tasks} tasks)")
        if active and now - self._last_line >= self.interval:
            parts = []
            for sid in sorted(active):
                info = self.tracker.getStageInfo(sid)
                if info is not None:
                    parts.append(f"stage {sid} {info.numCompletedTasks}/{info.numTasks} tasks")
            self._say(f"running {', '.join(parts)}; scanned so far "
                      f"{self._figures(self.records, self.bytes, now - self.t0)}")

    def _finished_unseen(self, active: set[int]) -> list[int]:
        """Stages of this application's jobs that finished without ever being seen running."""
        out = []
        for jid in self.tracker.getJobIdsForGroup():
            if jid in self._jobs_done:
                continue
            job = self.tracker.getJobInfo(jid)
            if job is None:
                continue
            for sid in job.stageIds:
                if sid in active or sid in self._running or sid in self._reported:
                    continue
                info = self.tracker.getStageInfo(sid)
                if info is not None and info.numTasks and info.numCompletedTasks >= info.numTasks:
                    out.append(sid)
            if job.status in ("SUCCEEDED", "FAILED"):   # its stages are all seen now: not looked at again
                self._jobs_done.add(jid)
        return out

    def _scan_totals(self) -> None:
        """Add the counter files written since the last look (each is written once, by rename, and never changes);
        ``scan-s<stage>-...`` files also count for their stage."""
        try:
            names = os.listdir(self.stats_dir)
        except OSError:
            return
        for name in names:
            if name in self._seen or not (name.startswith("scan-") and name.endswith(".json")):
                continue
            try:
                with open(os.path.join(self.stats_dir, name)) as f:
                    d = json.load(f)
            except (OSError, ValueError):
                continue
            self._seen.add(name)
            records, nbytes = d.get("rows_emitted", 0), d.get("bytes_mapped", 0)
            self.records += records
            self.bytes += nbytes
            tag = name.split("-")[1]
            if tag[:1] == "s" and tag[1:].isdigit():
                r, b = self._by_stage.get(int(tag[1:]), (0, 0))
                self._by_stage[int(tag[1:])] = (r + records, b + nbytes)

    @staticmethod
    def _figures(records: int, nbytes: int, secs: float) -> str:
        rate = nbytes / 1e6 / secs if secs > 0 else 0.0
        return f"{records:,} records, {nbytes / 1e6:,.1f} MB ({rate:,.1f} MB/s)"

    def _say(self, msg: str) -> None:
        elapsed = int(time.monotonic() - self.t0)
        print(f"[{self.name} {elapsed // 60}:{elapsed % 60:02d}] {msg}", file=self.out, flush=True)
        self._last_line = time.monotonic()
