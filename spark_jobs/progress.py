"""Progress of a long job on stderr: a line per finished Spark stage with the records and on-disk bytes the
``kafka-log`` scan read meanwhile and its MB/s, and a line every ``interval`` seconds while a stage runs.

A poller thread in the driver, not a JVM listener (PySpark cannot register one without py4j's callback server):
stages come from ``SparkContext.statusTracker()``, scan figures from the per-slice counter files the reader writes
into the job's ``statsPath`` (complete where executors share the driver's /tmp, as in local mode; elsewhere the
lines give stages and tasks only). A stage that begins and ends between two looks is found through its job.
Stages shorter than ``min_stage_s`` that scanned nothing are not reported.
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
        self._running: dict[int, tuple[float, int, int, int]] = {}   # stage -> (start, records, bytes, tasks)
        self._reported: set[int] = set()
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
        try:
            self._tick()                 # the stages that ended since the last look
        except Exception:  # noqa: BLE001 - progress must never fail the job (e.g. the session stopping)
            pass
        self._scan_totals()
        secs = time.monotonic() - self.t0
        self._say(f"done in {secs:.1f} s: scanned {self._figures(self.records, self.bytes, secs)}")

    # -- internals ----------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - progress must never fail the job (e.g. the session stopping)
                return

    def _tick(self) -> None:
        before = (self._last_tick, self.records, self.bytes, 0)
        self._scan_totals()
        now = self._last_tick = time.monotonic()
        active = set(self.tracker.getActiveStageIds())
        for sid in active - self._running.keys():
            self._running[sid] = (now, self.records, self.bytes, 0)
        # stages that began and ended between two looks: what was scanned since the last look goes to the first
        # of them (a job scans in its first stage; the later ones aggregate)
        for i, sid in enumerate(sorted(self._finished_unseen(active))):
            self._running[sid] = before if i == 0 else (before[0], self.records, self.bytes, 0)
        for sid in list(self._running):
            info = self.tracker.getStageInfo(sid)
            if info is not None:
                start, r, b, _ = self._running[sid]
                self._running[sid] = (start, r, b, info.numTasks)
            if sid in active:
                continue
            start, r, b, tasks = self._running.pop(sid)
            self._reported.add(sid)
            secs = now - start
            if self.records > r:    # stages running at the same time share what was scanned meanwhile
                self._say(f"stage {sid} done in {secs:.1f} s ({tasks} tasks): scanned meanwhile "
                          f"{self._figures(self.records - r, self.bytes - b, secs)}")
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
            job = self.tracker.getJobInfo(jid)
            for sid in job.stageIds if job is not None else ():
                if sid in active or sid in self._running or sid in self._reported:
                    continue
                info = self.tracker.getStageInfo(sid)
                if info is not None and info.numTasks and info.numCompletedTasks >= info.numTasks:
                    out.append(sid)
        return out

    def _scan_totals(self) -> None:
        """Add the counter files written since the last look (each is written once, by rename, and never changes)."""
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
            self.records += d.get("rows_emitted", 0)
            self.bytes += d.get("bytes_mapped", 0)

    @staticmethod
    def _figures(records: int, nbytes: int, secs: float) -> str:
        rate = nbytes / 1e6 / secs if secs > 0 else 0.0
        return f"{records:,} records, {nbytes / 1e6:,.1f} MB ({rate:,.1f} MB/s)"

    def _say(self, msg: str) -> None:
        elapsed = int(time.monotonic() - self.t0)
        print(f"[{self.name} {elapsed // 60}:{elapsed % 60:02d}] {msg}", file=self.out, flush=True)
        self._last_line = time.monotonic()
