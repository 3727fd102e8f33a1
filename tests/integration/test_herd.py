"""The herd at :00: a crontab line on many hosts fires rlock on all of them in the same second
(rlock-run(1) "Options of run"). A small herd here; bench/herd.py has the large ones and Redis's
cost per invocation (docs/PERFORMANCE.md "The herd at :00")."""
import collections
import json
import os
import signal
import subprocess
import time
import unittest

from harness import RLOCK, RedisTestCase, rlock_env, wait_until

# 200 at once in the plain build; a sanitizer's process is many times larger (TSan's above
# 100 MB), so fewer there.
HERD = 50 if os.environ.get("RLOCK_SANITIZE") else 200


def ms_of(stamp):
    """Milliseconds since the epoch of an RFC 3339 time as rlock writes it (…T16:45:54.282Z)."""
    import datetime
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


class Herd(RedisTestCase):
    def herd(self, n, args, hosts=20):
        """N rlock runs started at once (xargs -P N), as N hosts' crons; their exit statuses."""
        lines = "".join(f"host-{i % hosts}-{i}\n" for i in range(n))
        script = (f'RLOCK_HOSTNAME="$0" "{RLOCK}" ' + " ".join(args) +
                  ' 2>"$RLOCK_HERD_DIR/$0.err"; echo $?')
        env = rlock_env(self.server, RLOCK_HERD_DIR=self.path(""))
        r = subprocess.run(["xargs", "-P", str(n), "-n", "1", "sh", "-c", script], input=lines,
                           env=env, capture_output=True, text=True, timeout=240)
        self.assertEqual(r.returncode, 0, r.stderr)
        exits = collections.Counter(int(line) for line in r.stdout.split())
        self.assertEqual(sum(exits.values()), n, r.stdout)
        return exits

    def runs(self, key):
        return json.loads(self.run_rlock(["history", "-n", "1000", "--json", key]).stdout)["runs"]

    def errors(self):
        seen = []
        for name in os.listdir(self.path("")):
            if name.endswith(".err"):
                with open(self.path(name)) as f:
                    text = f.read()
                if "error" in text:
                    seen.append(f"{name}: {text.strip()}")
        return seen

    def test_once_per_hour_runs_once_and_the_rest_skip(self):
        exits = self.herd(HERD, ["run", "--once-per", "hour", "lock:hourly", "--", "true"])
        self.assertEqual(exits, {0: 1, 75: HERD - 1}, self.errors()[:5])
        self.assertEqual([r["exit_status"] for r in self.runs("lock:hourly")], [0])
        self.assert_no_lock("lock:hourly")

    def test_a_late_comer_reads_the_period_and_never_tries_the_lock(self):
        # The herd's late-comers (after the run, or drawn late by --jitter) read the period's
        # record and end: the lock is not taken (its fence stays where the run left it).
        key = "lock:late"
        self.assertEqual(self.run_rlock(["run", "--once-per", "hour", key, "--", "true"])
                         .returncode, 0)
        fence = self.server.cmd("GET", "{%s}:rlock:fence" % key)
        self.assertIsNotNone(fence)
        r = self.run_rlock(["run", "--once-per", "hour", key, "--", "true"])
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertIn("already run this period", r.stderr)
        self.assertEqual(self.server.cmd("GET", "{%s}:rlock:fence" % key), fence)

    def test_jitter_spreads_the_herd_and_once_per_still_runs_once(self):
        key = "lock:spread"
        # Every run records itself (--record-skips): when each one tried, by the server's clock.
        exits = self.herd(40, ["run", "--jitter", "2s", "--once-per", "hour", "--record-skips",
                               key, "--", "true"])
        self.assertEqual(exits, {0: 1, 75: 39}, self.errors()[:5])
        runs = self.runs(key)
        self.assertEqual(len(runs), 40, collections.Counter((r["end"], r["exit_status"])
                                                            for r in runs))
        self.assertEqual(sum(1 for r in runs if r["exit_status"] == 0), 1)
        tried = sorted(ms_of(r["acquired_at"] or r["holder"]["since"]) for r in runs)
        # 40 draws from [0, 2 s) all within 600 ms of each other: 40 * 0.3^39, never.
        self.assertGreater(tried[-1] - tried[0], 600, tried)
        self.assert_no_lock(key)

    def test_a_signal_during_the_jitter_ends_the_run_before_redis_hears_of_it(self):
        for verb in (["run", "--jitter", "1h", "lock:later", "--", "true"],
                     ["acquire", "--jitter", "1h", "lock:later"]):
            with self.subTest(verb=verb[0]):
                log = self.path(f"jitter-{verb[0]}.err")
                with open(log, "w") as err:
                    p = self.start(["-v", *verb], stderr=err)

                def said(text):
                    with open(log) as f:
                        return text in f.read()
                wait_until(lambda: said("first try in"), 10, "rlock to draw its pause")
                os.kill(p.pid, signal.SIGTERM)
                self.assertEqual(p.wait(timeout=10), 128 + signal.SIGTERM)
                self.assertEqual(self.server.cmd("DBSIZE"), 0)

    def test_a_late_comer_against_a_hanging_server_waits_one_command_timeout(self):
        # The look at the period is the run's one try when it does not wait: a server that
        # hangs costs one command timeout (2 s), not the look's and then the lock's (4 s, and
        # a release of what the lock's try might have taken, 6 s).
        self.server.freeze()
        try:
            start = time.monotonic()
            r = self.run_rlock(["run", "--command-timeout", "2s", "--once-per", "hour",
                                "lock:hung", "--", "true"])
            took = time.monotonic() - start
        finally:
            self.server.thaw()
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("timed out", r.stderr)
        self.assertLess(took, 3.5, r.stderr)
        self.assertEqual(self.server.cmd("DBSIZE"), 0)  # the lock was never tried


if __name__ == "__main__":
    unittest.main()
