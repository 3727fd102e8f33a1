"""Riding through Redis blips: --wait retries what may pass, with backoff, and only that."""
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from harness import (RLOCK, RedisServer, RedisTestCase, assert_no_processes_left, free_port,
                     rlock_env, run_rlock, start_rlock, stop_procs, wait_until)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


class RedisDown(unittest.TestCase):
    """No Redis at the start: a --wait outlasts a restart; what a retry cannot fix does not."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rlock-test-")
        self.procs = []
        self.addCleanup(assert_no_processes_left)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.addCleanup(lambda: stop_procs(self.procs))

    def test_a_waiter_started_while_redis_is_down_runs_once_it_is_back(self):
        port = free_port()
        url = f"redis://127.0.0.1:{port}"
        marker, log = os.path.join(self.tmp, "ran"), os.path.join(self.tmp, "log")
        with open(log, "w") as err:
            p = start_rlock(["run", "-v", "-w", "60s", "--redis", url, "k", "--",
                             "sh", "-c", f"echo ran > {marker}"], stderr=err)
        self.procs.append(p)
        # Several backoff steps go by, each said once at -v, and the command waits.
        wait_until(lambda: read(log).count("retrying in") >= 3, 20, "retries with backoff")
        self.assertIsNone(p.poll(), read(log))
        self.assertFalse(os.path.exists(marker))
        server = RedisServer(port=port)
        self.addCleanup(server.stop)
        self.assertEqual(p.wait(timeout=30), 0, read(log))
        self.assertEqual(read(marker), "ran\n")
        self.assertIn("Redis answers again after", read(log))
        self.assertEqual(server.cmd("EXISTS", "k"), 0)
        # Backoff: the pauses grow (50 ms doubling), so a 60 s wait does not try 300 times.
        steps = [line for line in read(log).splitlines() if "retrying in" in line]
        self.assertLess(len(steps), 12, read(log))

    def test_a_wait_that_runs_out_first_is_69_with_one_line(self):
        url = f"redis://127.0.0.1:{free_port()}"
        marker = os.path.join(self.tmp, "ran")
        start = time.monotonic()
        r = run_rlock(["run", "-w", "1500ms", "--redis", url, "k", "--", "touch", marker])
        took = time.monotonic() - start
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("cannot connect", r.stderr)
        self.assertIn("retried for", r.stderr)
        self.assertGreater(took, 1.2, "it gave up before its --wait ran out")
        self.assertFalse(os.path.exists(marker))
        # acquire waits the same way.
        r = run_rlock(["acquire", "-w", "500ms", "--redis", url, "k"])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("retried for", r.stderr)

    def test_no_wait_fails_at_once(self):
        url = f"redis://127.0.0.1:{free_port()}"
        r = run_rlock(["run", "-n", "--redis", url, "k", "--", "true"])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("cannot connect", r.stderr)
        self.assertNotIn("retried", r.stderr)

    def test_the_status_line_says_redis_is_unreachable(self):
        script = shutil.which("script")
        self.assertIsNotNone(script, "script(1) from bsdutils is needed")
        url = f"redis://127.0.0.1:{free_port()}"
        r = subprocess.run([script, "-qefc", f"{RLOCK} run -w 1500ms --redis {url} k -- true",
                            "/dev/null"], env=rlock_env(), capture_output=True, timeout=30)
        self.assertIn(b"waiting for k: Redis unreachable, retrying: cannot connect", r.stdout)


class Refusals(unittest.TestCase):
    """Errors a retry cannot fix end a --wait at once."""

    @classmethod
    def setUpClass(cls):
        cls.server = RedisServer("--requirepass", "s3cret")
        cls.addClassCleanup(cls.server.stop)

    def setUp(self):
        self.addCleanup(assert_no_processes_left)
        self.redis = self.server.client()
        self.addCleanup(self.redis.close)
        self.redis("AUTH", "s3cret")
        self.redis("FLUSHALL")

    def test_noauth_and_wrongpass_stay_immediate(self):
        url = f"redis://127.0.0.1:{self.server.port}"
        for args, what in ((["--redis", url], "give the password"),
                           (["--redis", f"redis://wrong@127.0.0.1:{self.server.port}"],
                            "WRONGPASS")):
            start = time.monotonic()
            r = run_rlock(["run", "-w", "60s"] + args + ["k", "--", "true"], env=rlock_env())
            self.assertEqual(r.returncode, 69, r.stderr)
            self.assertIn(what, r.stderr)
            self.assertNotIn("retried", r.stderr)
            self.assertLess(time.monotonic() - start, 20, f"{what}: retried")

    def test_a_key_of_another_type_stays_immediate(self):
        self.redis("HSET", "k", "a", "b")
        start = time.monotonic()
        r = run_rlock(["run", "-w", "60s", "--redis", f"redis://127.0.0.1:{self.server.port}",
                       "k", "--", "true"], env=rlock_env(RLOCK_PASSWORD="s3cret"))
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("not a lock", r.stderr)
        self.assertLess(time.monotonic() - start, 20, "WRONGTYPE: retried")


class FairAcrossABlip(RedisTestCase):
    """A --fair waiter whose queue entry survives a short outage keeps its place."""

    def queue(self):
        return self.server.cmd("ZRANGE", "{k}:rlock:queue", 0, -1)

    def test_the_first_waiter_is_still_first_after_the_blip(self):
        token = self.run_rlock(["acquire", "--ttl", "60s", "k"]).stdout.strip()
        order = self.path("order")
        waiters = []
        for name in ("first", "second"):
            waiters.append(self.start(["run", "--fair", "-w", "60s", "--command-timeout", "300ms",
                                       "k", "--", "sh", "-c", f"echo {name} >> {order}"]))
            wait_until(lambda: len(self.queue()) == len(waiters), 10, f"the {name} to queue")
        first_token = self.queue()[0]
        self.server.freeze()  # every command times out: the waiters retry
        try:
            time.sleep(0.4)  # the outage itself, not a synchronisation
        finally:
            self.server.thaw()
        wait_until(lambda: self.server.cmd("ZSCORE", "{k}:rlock:alive", first_token)
                   and float(self.server.cmd("ZSCORE", "{k}:rlock:alive", first_token))
                   > self.server.time_us() / 1000 + 1000, 10, "the first waiter back in touch")
        self.assertEqual(self.queue()[0], first_token)
        self.assertEqual(self.run_rlock(["release", "k", "--token", token]).returncode, 0)
        for w in waiters:
            self.assertEqual(w.wait(timeout=30), 0)
        self.assertEqual(read(order), "first\nsecond\n")


if __name__ == "__main__":
    unittest.main()
