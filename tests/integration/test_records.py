"""What is recorded is true: a waiter's acquisition is when it took the lock, a run whose rlock
was killed is in the history, and every recorded or shown time is the Redis server's."""
import json
import os
import re
import signal
import unittest
from datetime import datetime, timezone

from harness import RedisTestCase, rlock_env, wait_until

FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def ms_of(text):
    """Milliseconds since the epoch of an RFC 3339 time as rlock writes it."""
    t = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    return round(t.timestamp() * 1000)


def since_of(value):
    return ms_of(re.search(r" since=(\S+)", value).group(1))


def seconds(text):
    """A duration as rlock prints it ("3.3s", "120ms", "1m2s") in seconds."""
    total = 0.0
    for number, unit in re.findall(r"([\d.]+)(ms|s|m|h)", text):
        total += float(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total


class Records(RedisTestCase):
    def server_ms(self):
        secs, micros = self.server.cmd("TIME")
        return int(secs) * 1000 + int(micros) // 1000

    def runs(self, key, *args):
        r = self.run_rlock(["history", "--json", *args, key])
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["runs"]

    def hold(self, key, seconds_, *args, env=None):
        """rlock run KEY holding it SECONDS_; returned once its command runs."""
        started = self.path(f"started-{key}-{len(self.procs)}")
        p = self.start(["run", *args, key, "--", "sh", "-c", f"touch {started}; sleep {seconds_}"],
                       env=env)
        wait_until(lambda: os.path.exists(started), 10, f"the run of {key}")
        return p

    def test_a_waiters_acquisition_is_when_it_took_the_lock(self):
        a = self.hold("k", 2)
        a_since = since_of(self.server.cmd("GET", "k"))
        b_started = self.path("b-started")
        b = self.start(["run", "--wait", "20s", "k", "--", "sh", "-c",
                        f"touch {b_started}; sleep 3"])
        wait_until(lambda: self.server.cmd("ZCARD", "{k}:rlock:queue") == 1, 10, "B to wait")
        wait_until(lambda: os.path.exists(b_started), 10, "B to take the lock")
        # B's value says when B took it: after A's two seconds, not when B began to wait.
        value = self.server.cmd("GET", "k")
        self.assertGreaterEqual(since_of(value), a_since + 2000, value)
        self.assertLessEqual(since_of(value), self.server_ms())
        status = self.run_rlock(["status", "k"])
        held = re.search(r" for (\S+)\s", status.stdout)
        self.assertIsNotNone(held, status.stdout)
        self.assertLess(seconds(held.group(1)), 2.0, status.stdout)  # B's, not A's 2 s and more
        j = json.loads(self.run_rlock(["status", "--json", "k"]).stdout)
        lock = j["locks"][0] if "locks" in j else j
        self.assertEqual(ms_of(lock["acquired_at"]), since_of(value))
        self.assertEqual(a.wait(timeout=10), 0)
        self.assertEqual(b.wait(timeout=15), 0)
        newest, older = self.runs("k")[:2]
        self.assertLess(older["fence"], newest["fence"])
        self.assertEqual(newest["fence"], int(value.rsplit("fence=", 1)[1]))
        a_end = int(older["id"].split("-")[0])
        self.assertGreaterEqual(ms_of(newest["acquired_at"]), a_since + 2000)
        self.assertGreaterEqual(ms_of(newest["acquired_at"]), a_end - 100)
        self.assertGreater(newest["waited_ms"], 1000)

    def test_acquire_wait_records_when_it_took_the_lock(self):
        a = self.hold("k", 2)
        a_since = since_of(self.server.cmd("GET", "k"))
        got = self.run_rlock(["acquire", "--wait", "20s", "k"])
        self.assertEqual(got.returncode, 0, got.stderr)
        self.assertEqual(a.wait(timeout=10), 0)
        value = self.server.cmd("GET", "k")
        self.assertGreaterEqual(since_of(value), a_since + 2000, value)
        self.assertEqual(self.run_rlock(["release", "k", "--token",
                                         got.stdout.strip()]).returncode, 0)

    def test_a_killed_rlocks_run_is_running_then_its_end_unknown(self):
        self.assertEqual(self.run_rlock(["run", "k", "--", "true"]).returncode, 0)
        p = self.hold("k", 30, "--ttl", "1s")
        fence = int(self.server.cmd("GET", "k").rsplit("fence=", 1)[1])
        # While its lock lives, the run is running: in the history, not a failure for check.
        newest = self.runs("k")[0]
        self.assertEqual((newest["end"], newest["fence"], newest["exit_status"]),
                         ("running", fence, None))
        self.assertIn("running", self.run_rlock(["history", "k"]).stdout.splitlines()[1])
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=5)
        self.procs.remove(p)
        wait_until(lambda: self.server.cmd("GET", "k") is None, 10, "the lock to expire")
        runs = self.runs("k")
        self.assertEqual(len(runs), 2)
        self.assertEqual((runs[0]["end"], runs[0]["fence"], runs[0]["exit_status"],
                          runs[0]["held_ms"]), ("unknown", fence, None, None))
        self.assertEqual((runs[1]["end"], runs[1]["exit_status"]), ("exited", 0))
        self.assertRegex(self.run_rlock(["history", "k"]).stdout.splitlines()[1],
                         rf"  -  .*  {fence}  +end unknown$")
        self.assertIn("last run: end unknown", self.run_rlock(["status", "k"]).stdout)
        # check: the killed run is the last, and no success; the earlier one was.
        r = self.run_rlock(["check", "k", "--every", "1h", "--json"])
        j = json.loads(r.stdout)
        self.assertEqual(r.returncode, 0, r.stderr)  # the first run succeeded within the hour
        self.assertEqual((j["last_run"]["end"], j["last_run"]["exit_status"]), ("unknown", None))
        self.assertEqual(j["last_success"]["fence"], runs[1]["fence"])
        self.assertEqual(self.run_rlock(["check", "k", "--every", "1s"]).returncode, 1)
        # The next run's end leaves the dead one's start as it is: three runs, one entry each.
        self.assertEqual(self.run_rlock(["run", "k", "--", "true"]).returncode, 0)
        self.assertEqual([r["end"] for r in self.runs("k")], ["exited", "unknown", "exited"])
        self.assertEqual(self.server.cmd("XLEN", "{k}:rlock:history"), 3)

    def test_a_killed_once_per_run_is_recorded_by_its_claim_and_retried(self):
        p = self.hold("k", 30, "--ttl", "1s", "--once-per", "day")
        runs = self.runs("k")
        self.assertEqual((len(runs), runs[0]["end"], runs[0]["period"] is not None),
                         (1, "running", True))
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=5)
        self.procs.remove(p)
        wait_until(lambda: self.server.cmd("GET", "k") is None, 10, "the lock to expire")
        self.assertEqual(self.runs("k")[0]["end"], "unknown")
        plain = self.run_rlock(["run", "--once-per", "day", "k", "--", "true"])
        self.assertEqual(plain.returncode, 75, plain.stderr)
        self.assertIn("never reported its end", plain.stderr)
        retried = self.run_rlock(["run", "--once-per", "day", "--retry-failed", "k", "--", "true"])
        self.assertEqual(retried.returncode, 0, retried.stderr)
        self.assertEqual([r["end"] for r in self.runs("k")], ["exited", "unknown"])

    def test_a_run_that_never_starts_its_command_leaves_no_start(self):
        self.assertEqual(self.run_rlock(["run", "k", "--", "true"]).returncode, 0)
        fences = [int(self.server.cmd("GET", "{k}:rlock:fence"))]
        # Runnable when rlock looks, but exec fails in the child (the file is open for
        # writing: ETXTBSY): the lock was taken, the command never started.
        script = self.path("job")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n")
            f.flush()
            os.chmod(script, 0o755)
            r = self.run_rlock(["run", "k", "--", script])
        self.assertEqual(r.returncode, 126, r.stderr)
        self.assertIn("Text file busy", r.stderr)
        fences.append(int(self.server.cmd("GET", "{k}:rlock:fence")))
        # Taken, and given back at once for want of replicas (--min-replicas).
        r = self.run_rlock(["run", "--min-replicas", "1", "k", "--", "true"])
        self.assertEqual(r.returncode, 69, r.stderr)
        fences.append(int(self.server.cmd("GET", "{k}:rlock:fence")))
        self.assertEqual(sorted(set(fences)), fences)  # each took the lock
        self.assertEqual([r["end"] for r in self.runs("k")], ["exited"])

    def test_entries_of_older_rlocks_read_as_before_and_length_counts_runs(self):
        # An end-only entry, as rlock wrote before starts were recorded.
        self.server.cmd("XADD", "{k}:rlock:history", "*", "host", "old-1", "pid", "7", "user",
                        "ops", "cmd", "job", "since", "2026-11-30T04:00:01.515Z", "fence", "3",
                        "waited_ms", "0", "held_ms", "1000", "status", "0", "end", "exited")
        for _ in range(3):
            self.assertEqual(self.run_rlock(["run", "--history-length", "3", "k", "--",
                                             "true"]).returncode, 0)
        runs = self.runs("k")
        self.assertEqual(len(runs), 3)
        self.assertEqual(self.server.cmd("XLEN", "{k}:rlock:history"), 3)
        self.assertEqual({r["end"] for r in runs}, {"exited"})
        self.server.cmd("DEL", "{k}:rlock:history")
        self.server.cmd("XADD", "{k}:rlock:history", "*", "host", "old-1", "pid", "7", "user",
                        "ops", "cmd", "job", "since", "2026-11-30T04:00:01.515Z", "fence", "3",
                        "waited_ms", "0", "held_ms", "1000", "status", "0", "end", "exited")
        old = self.runs("k")[0]
        self.assertEqual((old["holder"]["host"], old["end"], old["exit_status"]),
                         ("old-1", "exited", 0))
        self.assertEqual(self.run_rlock(["check", "k", "--every", "1h"]).returncode, 0)


@unittest.skipIf(os.environ.get("RLOCK_SANITIZE"),
                 "libfaketime is preloaded ahead of the sanitizer's runtime, which must come first "
                 "(ASan and TSan refuse to start)")
class HostClockAhead(RedisTestCase):
    """One host's clock 3 minutes ahead (libfaketime on rlock only, never on redis-server)."""

    def ahead(self, host="fast-1", by="+3m"):
        if not os.path.exists(FAKETIME):
            self.fail(f"{FAKETIME} is missing: apt-get install libfaketime")
        return rlock_env(self.server, RLOCK_HOSTNAME=host, LD_PRELOAD=FAKETIME, FAKETIME=by,
                         FAKETIME_DONT_RESET="1")

    def server_ms(self):
        secs, micros = self.server.cmd("TIME")
        return int(secs) * 1000 + int(micros) // 1000

    def test_faketime_reaches_rlock(self):
        # What the test below relies on: the preloaded clock is rlock's (statically linked
        # libstdc++ still asks libc for the time). --metrics-file records the host's clock.
        metrics = self.path("m.prom")
        r = self.run_rlock(["run", "--metrics-file", metrics, "k", "--", "true"], env=self.ahead())
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(metrics) as f:
            finished = re.search(r"rlock_last_success_timestamp_seconds\{[^}]*\} (\S+)",
                                 f.read())
        self.assertGreater(float(finished.group(1)) * 1000, self.server_ms() + 120000)

    def test_a_period_is_the_servers_even_when_the_host_names_another(self):
        # A host two hours ahead names another hour than the server's at its first look
        # (PeriodGuard::finished_run): it reads the server's hour again, finds the run, and
        # ends without trying the lock (its fence stays).
        self.assertEqual(self.run_rlock(["run", "--once-per", "hour", "k", "--", "true"],
                                        env=rlock_env(self.server, RLOCK_HOSTNAME="ok-1")
                                        ).returncode, 0)
        fence = self.server.cmd("GET", "{k}:rlock:fence")
        r = self.run_rlock(["run", "--once-per", "hour", "k", "--", "true"],
                           env=self.ahead(by="+2h"))
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertIn("already run this period", r.stderr)
        self.assertEqual(self.server.cmd("GET", "{k}:rlock:fence"), fence)

    def test_times_are_the_servers(self):
        before = self.server_ms()
        self.assertEqual(self.run_rlock(["run", "k", "--", "true"],
                                        env=rlock_env(self.server, RLOCK_HOSTNAME="ok-1")
                                        ).returncode, 0)
        started = self.path("started")
        p = self.start(["run", "k", "--", "sh", "-c", f"touch {started}; sleep 30"],
                       env=self.ahead())
        wait_until(lambda: os.path.exists(started), 10, "the fast host's run")
        since = since_of(self.server.cmd("GET", "k"))
        self.assertLessEqual(since, self.server_ms())
        self.assertGreaterEqual(since, before)
        wait_until(lambda: self.server_ms() - since >= 1500, 10, "a second and a half")
        for env in (None, self.ahead("fast-2")):  # seen from a sound host, and a fast one
            held = re.search(r" for (\S+)\s", self.run_rlock(["status", "k"], env=env).stdout)
            self.assertTrue(1.5 <= seconds(held.group(1)) < 60, held.group(0))
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
        runs = json.loads(self.run_rlock(["history", "--json", "k"]).stdout)["runs"]
        self.assertEqual([r["holder"]["host"] for r in runs], ["fast-1", "ok-1"])
        self.assertGreater(ms_of(runs[0]["acquired_at"]), ms_of(runs[1]["acquired_at"]))
        self.assertLessEqual(ms_of(runs[0]["acquired_at"]), self.server_ms())

    def test_the_periods_run_is_dated_by_the_server(self):
        r = self.run_rlock(["run", "--once-per", "day", "k", "--", "true"], env=self.ahead())
        self.assertEqual(r.returncode, 0, r.stderr)
        now = self.server_ms()
        late = self.run_rlock(["run", "--once-per", "day", "k", "--", "true"])
        self.assertEqual(late.returncode, 75, late.stderr)
        at = re.search(r"on fast-1 at (\S+):", late.stderr)
        self.assertIsNotNone(at, late.stderr)
        self.assertLessEqual(abs(ms_of(at.group(1)) - now), 10000, late.stderr)
        slot = self.server.cmd("KEYS", "{k}:rlock:once:*")[0]
        ended = self.server.cmd("HGET", slot, "ended")
        self.assertLessEqual(abs(ms_of(ended) - now), 10000)


if __name__ == "__main__":
    unittest.main()
