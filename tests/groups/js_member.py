"""A KafkaJS group member in its own node process (js/member.js), and KafkaJS installed from the lockfile."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from collections import Counter

import pytest

JS = os.path.join(os.path.dirname(__file__), "js")


_INSTALL = threading.Lock()  # producer threads and group members may ask at once: one npm ci


def ensure_kafkajs() -> None:
    """Install KafkaJS from the lockfile when missing (node is on the machine; `make test` needs nothing else)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed for the KafkaJS tests")
    with _INSTALL:
        _install(npm)


def _install(npm: str) -> None:
    if not os.path.isdir(os.path.join(JS, "node_modules", "kafkajs")):
        out = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, f"npm ci failed:\n{out.stdout}\n{out.stderr}"


class JsMember:
    def __init__(self, bootstrap, group, topic, name, log_path: str | None = None, retries: int | None = None):
        """``log_path``: KafkaJS's own debug log goes there (else nowhere). ``retries``: the consumer's retry
        count (KafkaJS's default, 5, when None): its retriers nest (a commit's inside the runner's), so the
        default takes ~50 s of retrying the same broker before the consumer restarts."""
        ensure_kafkajs()
        self.lines: list[str] = []
        env = dict(os.environ)
        if log_path:
            env["KAFKAJS_LOG_LEVEL"] = "DEBUG"
        if retries is not None:
            env["KAFKAJS_CONSUMER_RETRIES"] = str(retries)
        self._log = open(log_path, "wb") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(["node", os.path.join(JS, "member.js"), bootstrap, group, topic, name],
                                     stdout=subprocess.PIPE, stderr=self._log, text=True, env=env)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def assigned(self) -> set[int]:
        a = [line for line in list(self.lines) if line.startswith("A ")]
        return {int(x) for x in a[-1][2:].split(",") if x} if a else set()

    def _records(self, tag: str) -> list[tuple[int, int]]:
        return [tuple(map(int, line.split()[1:])) for line in list(self.lines) if line.startswith(tag + " ")]

    def processed(self):
        return self._records("R")

    def uncommitted(self) -> list[tuple[int, int]]:
        """Records with a processing whose commit did not succeed (KafkaJS redelivers them): processed more
        often than committed."""
        committed = Counter(self._records("C"))
        return [r for r, n in Counter(self.processed()).items() if n > committed[r]]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._log is not subprocess.DEVNULL:
            self._log.close()
        errors = [line for line in self.lines if line.startswith("ERR")]
        assert not errors, errors
