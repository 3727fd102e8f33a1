"""The lease is counted from when a command was sent, not from when its reply came; and it holds
while rlock itself cannot act (stopped, hung, starved): its guardian stops the command by then.

A proxy delivers every reply DELAY late and then cuts the holder off from Redis right after a
reply: the acquire's, or a renewal's. The server set the key's expiry when it ran the command,
DELAY before the holder heard of it, so a holder that counted its lease from the reply would let
its command run DELAY past the key's expiry. A waiter connected directly takes the lock the
moment the key expires and runs the fault suite's critical section, which finds the holder's
command still inside through a kernel flock (rlock_fault_section): an overlap.

The holder's command ignores SIGTERM, so only the SIGKILL that rlock sends at the lease's
deadline stops it; the margin is the drift allowance (ttl/100 + 2 ms) against DELAY.
"""
import json
import os
import signal
import time
import unittest

from harness import (DelayProxy, RedisTestCase, pid_alive, rlock_env, wait_until,
                     write_report)

SECTION = os.environ.get("RLOCK_FAULT_SECTION") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "tests", "rlock_fault_section")
TTL = "5s"      # renewals every 1.67 s, each allowed 833 ms for its reply
DELAY = 0.5     # every reply this late: within a renewal's allowance
RUNS = 3
LOST = 76
REPORT = []


def tearDownModule():
    write_report("lease-report.txt", REPORT)


def log_lines(path):
    try:
        with open(path) as f:
            return [line.split() for line in f]
    except FileNotFoundError:
        return []


class LeaseFromSendTime(RedisTestCase):
    def setUp(self):
        super().setUp()
        # Cache the scripts on the server (acquire, renew, release), so that the first reply
        # through the proxy is the acquire's or the renewal's own, not a NOSCRIPT.
        r = self.run_rlock(["run", "--ttl", "300ms", "warm-up", "--", "sleep", "0.4"])
        self.assertEqual(r.returncode, 0, r.stderr)

    def section(self, log, probe, hold_ms, ignore_term):
        trap = "trap '' TERM; " if ignore_term else ""
        return ["sh", "-c", f"{trap}exec {SECTION} {log} {probe} 1 {hold_ms}"]

    def start_holder(self, run, cut_after_acquire):
        """Starts a holder behind its own proxy, armed as asked, and a waiter behind it."""
        key = f"lease-{run}"
        log, probe = self.path(f"log-{run}"), self.path(f"probe-{run}")
        os.mkdir(probe)
        proxy = DelayProxy(self.server.port, DELAY)
        self.addCleanup(proxy.close)
        if cut_after_acquire:
            proxy.arm()
        holder = self.start(["run", "--ttl", TTL, key, "--"] +
                            self.section(log, probe, 60000, ignore_term=True),
                            env=rlock_env(RLOCK_REDIS_URL=proxy.url))
        wait_until(lambda: any(l[0] == "enter" for l in log_lines(log)), 20,
                   "the holder's command to start")
        if not cut_after_acquire:
            proxy.arm()  # the next reply is the first renewal's
        waiter = self.start(["run", "--wait", "30s", key, "--"] +
                            self.section(log, probe, 50, ignore_term=False))
        return proxy, holder, waiter, log

    def check(self, proxy, holder, waiter, log):
        self.assertEqual(holder.wait(timeout=30), LOST, holder.stderr.read())
        self.assertEqual(waiter.wait(timeout=30), 0, waiter.stderr.read())
        self.assertIsNotNone(proxy.cut_at, "the proxy never cut the holder off")
        self.assertFalse(proxy.last_reply.startswith(b"-"),
                         f"the reply before the cut was an error: {proxy.last_reply!r}")
        lines = log_lines(log)
        self.assertEqual([l[0] for l in lines if l[0] == "enter"], ["enter", "enter"], lines)
        overlaps = [l for l in lines if l[0].startswith("overlap")]
        self.assertEqual(overlaps, [], "the waiter found the holder's command still running "
                         "after the key expired: the lease was counted from a reply")

    def holders_cut_off(self, cut_after_acquire):
        # RUNS holders at once, each on its own key and proxy: the same proof, a third the time.
        runs = [self.start_holder(run, cut_after_acquire) for run in range(RUNS)]
        for run, started in enumerate(runs):
            with self.subTest(run=run):
                self.check(*started)

    def test_cut_off_after_a_late_renewal_reply(self):
        self.holders_cut_off(cut_after_acquire=False)

    def test_cut_off_after_a_late_acquire_reply(self):
        self.holders_cut_off(cut_after_acquire=True)


class StoppedRlock(RedisTestCase):
    """`kill -STOP` of rlock alone (a debugger, a freezer on one process, a hang): its renewals
    stop with it, and its guardian stops the command at the end of the last confirmed lease,
    counted from the renewal's send time. The holder's replies come through a proxy DELAY late,
    so a guardian that counted from the reply would let the command run DELAY past the key's
    expiry, where the waiter's section finds it (an overlap); one never told of renewals kills
    the command at the first lease's end, while rlock still renews."""

    TTL = "3s"        # renewals every 1 s, each allowed 500 ms for its reply
    DELAY = 0.4
    KILL_AFTER = 1.0  # the default for a 3 s ttl

    def setUp(self):
        super().setUp()
        r = self.run_rlock(["run", "--ttl", "300ms", "warm-up", "--", "sleep", "0.4"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.proxy = DelayProxy(self.server.port, self.DELAY)
        self.addCleanup(self.proxy.close)

    def start_stopped_holder(self, command, key):
        """Starts a holder of KEY behind the proxy; once it has renewed past its first lease,
        stops it (SIGSTOP). Returns (Popen, its stderr's path)."""
        err = self.path(f"{key}.err")
        with open(err, "w") as f:
            holder = self.start(["-v", "run", "--ttl", self.TTL, key, "--"] + command,
                                env=rlock_env(RLOCK_REDIS_URL=self.proxy.url), stderr=f)
        started = time.monotonic()

        def renewals():
            with open(err) as f:
                return f.read().count(": renewed")
        wait_until(lambda: renewals() >= 3 and time.monotonic() - started > 3.2, 20,
                   "three renewals, past the first lease's end")
        os.kill(holder.pid, signal.SIGSTOP)
        self.addCleanup(lambda: holder.poll() is None and os.kill(holder.pid, signal.SIGCONT))
        return holder, err

    def resume(self, holder, err):
        os.kill(holder.pid, signal.SIGCONT)
        self.assertEqual(holder.wait(timeout=20), LOST)
        with open(err) as f:
            text = f.read()
        self.assertIn("rlock was stopped or starved past its lease", text)
        return text

    def test_the_command_is_killed_before_the_lease_ends(self):
        log, probe = self.path("log"), self.path("probe")
        os.mkdir(probe)
        holder, err = self.start_stopped_holder(
            ["sh", "-c", f"trap '' TERM; exec {SECTION} {log} {probe} 1 600000"], "k")
        section = next(int(l[1]) for l in log_lines(log) if l[0] == "enter")
        self.assertTrue(pid_alive(section), "the command died while rlock still renewed")
        stopped = time.monotonic()
        waiter = self.start(["run", "--wait", "30s", "k", "--", SECTION, log, probe, "1", "50"])
        wait_until(lambda: not pid_alive(section), 20, "the guardian to stop the command",
                   interval=0.001)
        dead_ns = time.monotonic_ns()
        self.assertEqual(waiter.wait(timeout=30), 0, waiter.stderr.read())
        # The waiter entered the moment the key expired on the server (it waits by notification).
        entered_ns = next(int(l[4]) for l in log_lines(log)[1:] if l[0] == "enter")
        REPORT.append(f"rlock SIGSTOPped, ttl {self.TTL}, replies {self.DELAY}s late, command "
                      f"ignoring TERM: dead {(entered_ns - dead_ns) / 1e6:.1f} ms before the key "
                      f"expired (the next holder entered)")
        # The guardian acted on its own: rlock was stopped for all of it.
        self.assertLess(time.monotonic() - stopped, self.DELAY + 3 + 10)
        lines = log_lines(log)
        self.assertEqual([l[0] for l in lines if l[0] == "enter"], ["enter", "enter"], lines)
        self.assertEqual([l for l in lines if l[0].startswith("overlap")], [],
                         "the waiter found the stopped holder's command still running after "
                         "the key expired")
        self.resume(holder, err)

    def test_the_kill_signal_comes_first(self):
        done = self.path("term")
        holder, err = self.start_stopped_holder(
            ["sh", "-c", f"trap 'echo TERM > {done}; exit 0' TERM; while :; do sleep 0.05; done"],
            "k2")
        self.assertEqual(self.wait_file("term", timeout=10), "TERM\n")
        termed = time.monotonic()
        # Sent by the guardian while the lease still held, half of kill-after before its end.
        wait_until(lambda: self.server.cmd("GET", "k2") is None, 10, "the stopped lock to expire",
                   interval=0.001)
        REPORT.append(f"rlock SIGSTOPped, ttl {self.TTL}: the command got TERM "
                      f"{(time.monotonic() - termed) * 1000:.0f} ms before the key expired")
        self.resume(holder, err)
        runs = json.loads(self.run_rlock(["history", "--json", "k2"]).stdout)["runs"]
        self.assertEqual([(r["end"], r["exit_status"]) for r in runs], [("lost", LOST)])



if __name__ == "__main__":
    unittest.main()
