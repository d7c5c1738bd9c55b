"""``odradek serve`` with benchmark-only knobs, for benchmarks/bench_broker.py. Not part of the broker.

    python benchmarks/_serve_variant.py [--zero-copy on|off] [--profile PREFIX] -- serve --config ... --override ...

* ``--zero-copy off`` sets ``Broker.server.zero_copy = False`` after construction, so fetch responses read
  file slices into memory and write bytes (the comparison path of broker/network/sendfile.py's PartWriter).
* ``--profile PREFIX`` runs the event-loop thread (where every handler runs) under cProfile, timed
  with the thread's CPU clock (``time.thread_time``: time spent preempted by other processes on a
  busy machine is not charged to the function that happened to be running). Each SIGUSR1 dumps the
  profile gathered since the previous one to ``PREFIX.<n>.prof`` and starts a new
  one; the driver waits for the ``PROFILE-DUMPED <path>`` line on stdout.
* On shutdown (SIGTERM) it prints ``SENDSTATS {json}``: sendfile calls and bytes, bytes copied.

Everything after ``--`` is handed to broker.cli.main unchanged, so the config is exactly `odradek serve`'s.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker import cli, node  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zero-copy", choices=("on", "off"), default="on")
    ap.add_argument("--profile", metavar="PREFIX")
    ap.add_argument("--profile-clock", choices=("cpu", "wall"), default="cpu")
    args, rest = ap.parse_known_args()
    if rest and rest[0] == "--":
        rest = rest[1:]
    zero_copy = args.zero_copy == "on"
    state = {"prof": None, "seg": 0}
    clock = time.thread_time if args.profile_clock == "cpu" else time.perf_counter

    def new_profile() -> cProfile.Profile:
        return cProfile.Profile(clock)

    def dump_segment() -> None:
        prof = state["prof"]
        if prof is None:
            return
        prof.disable()
        path = f"{args.profile}.{state['seg']}.prof"
        prof.dump_stats(path)
        state["seg"] += 1
        print(f"PROFILE-DUMPED {path}", flush=True)
        state["prof"] = new_profile()
        state["prof"].enable()

    orig_init = node.Broker.__init__
    orig_start = node.Broker.start
    orig_stop = node.Broker.stop

    def __init__(self, config) -> None:
        orig_init(self, config)
        self.server.zero_copy = zero_copy

    async def start(self) -> None:
        await orig_start(self)
        if args.profile:
            asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump_segment)
        print(f"VARIANT zero_copy={self.server.zero_copy} profile={bool(args.profile)}", flush=True)

    async def stop(self) -> None:
        st = self.send_stats
        print("SENDSTATS " + json.dumps({"sendfile_calls": st.calls, "sendfile_bytes": st.bytes,
                                         "copied_bytes": st.copied_bytes}), flush=True)
        await orig_stop(self)

    node.Broker.__init__ = __init__
    node.Broker.start = start
    node.Broker.stop = stop

    if args.profile:
        state["prof"] = new_profile()
        state["prof"].enable()
    try:
        return cli.main(rest)
    finally:
        if state["prof"] is not None:
            dump_segment()
            state["prof"].disable()


if __name__ == "__main__":
    sys.exit(main())
