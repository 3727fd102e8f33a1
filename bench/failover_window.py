#!/usr/bin/python3
"""Failover windows: how long locks cannot be taken through a failover, measured, beside what
`rlock doctor` predicts for the same topology (docs/DESIGN.md "Failover windows").

A loop runs `rlock run -n` on a fresh key every 50 ms (--command-timeout 500ms) and records
when each one that got its lock ended; the failover is started in the middle. The window is the
longest gap between two such runs around it: a holder's renewal, which goes the same way (to
the primary the sentinels confirm, to the slot's master), is refused as long.

Scenarios: Sentinel (three sentinels, two replicas, down-after-milliseconds 1000) with a planned
failover (SENTINEL FAILOVER) and with the primary killed, each with Redis's default
repl-diskless-sync-delay (5 s) and with 0, and a planned failover with one replica, where
--min-replicas 1 (the default behind Sentinel) waits for the old primary's full resync; a Cluster (three masters, a replica each) with the
key's master killed, cluster-node-timeout 3000 and 1000.

A benchmark, not a test: it prints a table and writes its section of bench/results.md (or --out).
"""
import argparse
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from sections import write_section  # noqa: E402

from harness import RLOCK, cluster_owner, start_cluster, wait_until  # noqa: E402
from test_failover import Topology  # noqa: E402


def predicted(url):
    """doctor's failover window for URL, in seconds (its failover line)."""
    r = subprocess.run([RLOCK, "--redis", url, "doctor"], capture_output=True, text=True,
                       timeout=60)
    m = re.search(r"a failover takes about (\S+) ", r.stdout)
    if not m:
        raise RuntimeError("no failover line in doctor's output:\n" + r.stdout + r.stderr)
    planned = re.search(r", (\S+) when planned \(SENTINEL FAILOVER", r.stdout)
    seconds = lambda d: float(d[:-2]) / 1000 if d.endswith("ms") else float(d.rstrip("s"))
    return seconds(m.group(1)), seconds(planned.group(1)) if planned else None


class Prober:
    """rlock run -n on a fresh key every 50 ms; the end times of the runs that got their lock."""

    def __init__(self, url, prefix="probe:"):
        self.url, self.prefix, self.ok, self.stop = url, prefix, [], False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        i = 0
        while not self.stop:
            i += 1
            r = subprocess.run([RLOCK, "--redis", self.url, "--command-timeout", "500ms", "-q",
                                "run", "-n", "--ttl", "5s", f"{self.prefix}{i}", "--", "true"],
                               capture_output=True, timeout=30)
            if r.returncode == 0:
                self.ok.append(time.monotonic())
            time.sleep(0.05)

    def window(self, since):
        """The longest gap between runs that got their lock, from the last before SINCE."""
        self.stop = True
        self.thread.join()
        before = [t for t in self.ok if t <= since]
        after = [t for t in self.ok if t > since]
        if not before or not after:
            return None
        points = [before[-1]] + after
        return max(b - a for a, b in zip(points, points[1:]))


def sentinel(delay, planned, replicas=2):
    t = Topology(replicas=replicas)
    try:
        for s in t.servers:
            s.cmd("CONFIG", "SET", "repl-diskless-sync-delay", str(delay))
        unplanned, planned_window = predicted(t.url)
        p = Prober(t.url)
        wait_until(lambda: len(p.ok) >= 5, 20, "runs before the failover")
        start = time.monotonic()
        if planned:
            t.fail_over()
        else:
            t.servers[0].kill()
        wait_until(lambda: p.ok and p.ok[-1] > start + 0.5 and
                   t.primary_port() != t.servers[0].port, 60, "runs after the failover")
        time.sleep(1)
        return p.window(start), planned_window if planned else unplanned
    finally:
        t.close()


def cluster(timeout_ms):
    nodes = start_cluster("--cluster-node-timeout", str(timeout_ms), replicas=1)
    try:
        url = nodes[0].url
        predicted_window, _ = predicted(url)
        # Every probe key in the slot of the master killed: a hash tag puts them there.
        owner = cluster_owner(nodes, "{probe}")
        seed = next(n for n in nodes if n is not owner)
        p = Prober(seed.url, "{probe}:")
        wait_until(lambda: len(p.ok) >= 5, 20, "runs before the kill")
        start = time.monotonic()
        owner.kill()
        wait_until(lambda: p.ok and p.ok[-1] > start + 0.5, 60, "runs after the promotion")
        time.sleep(1)
        return p.window(start), predicted_window
    finally:
        for n in nodes:
            n.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--only", help="the scenarios whose name has this text")
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    args = ap.parse_args()
    rows = []
    scenarios = [
        ("Sentinel, planned, repl-diskless-sync-delay 5 (default)", lambda: sentinel(5, True)),
        ("Sentinel, planned, repl-diskless-sync-delay 0", lambda: sentinel(0, True)),
        ("Sentinel, one replica, planned, delay 5 (default)", lambda: sentinel(5, True, 1)),
        ("Sentinel, one replica, planned, delay 0", lambda: sentinel(0, True, 1)),
        ("Sentinel, primary killed, delay 5 (default)", lambda: sentinel(5, False)),
        ("Sentinel, primary killed, delay 0", lambda: sentinel(0, False)),
        ("Cluster, master killed, cluster-node-timeout 3000", lambda: cluster(3000)),
        ("Cluster, master killed, cluster-node-timeout 1000", lambda: cluster(1000)),
    ]
    for name, run in scenarios:
        if args.only and args.only not in name:
            continue
        measured, prediction = [], None
        for _ in range(args.tries):
            window, prediction = run()
            if window is not None:
                measured.append(window)
        shown = ", ".join(f"{w:.1f}" for w in measured)
        rows.append(f"| {name} | {shown} | {max(measured):.1f} | {prediction:.1f} |")
        print(rows[-1], flush=True)
    lines = ["Failover windows (bench/failover_window.py): seconds in which no `rlock run -n` "
             "got its lock, per try, beside `rlock doctor`'s prediction.", "",
             "| scenario | measured (s) | most (s) | doctor (s) |", "|---|---|---|---|"] + rows
    write_section(args.out, "failover_window", "\n".join(lines))


if __name__ == "__main__":
    main()
