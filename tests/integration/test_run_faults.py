"""Lease safety: the command never runs on while the lock may be someone else's."""
import os
import signal
import subprocess
import time
import unittest

from harness import RedisServer, RedisTestCase, pid_alive, read_pids, start_rlock, wait_until

# A command with helpers: the shell and two grandchildren, all pids written to {pids}.
FAMILY = "sleep 60 & echo $! >> {pids}; sleep 60 & echo $! >> {pids}; echo $$ >> {pids}; wait"


class LeaseLoss(RedisTestCase):
    def start_family(self, args, key="k"):
        pids = self.path("pids")
        p = self.start(["run"] + args + [key, "--", "sh", "-c", FAMILY.format(pids=pids)])
        wait_until(lambda: len(read_pids(pids)) == 3, 10, "the command and its helpers")
        return p, read_pids(pids)

    def wait_all_dead(self, pids, timeout):
        wait_until(lambda: not any(pid_alive(x) for x in pids), timeout, f"pids {pids} to end")

    def test_stolen_lock_stops_the_command_and_its_children_with_76(self):
        p, pids = self.start_family(["--ttl", "3s"])
        stolen_at = time.monotonic()
        self.server.cmd("SET", "k", "other-holder")  # an operator or a bug overwrites the key
        self.wait_all_dead(pids, 10)
        stopped_after = time.monotonic() - stolen_at
        self.assertEqual(p.wait(timeout=10), 76)
        self.assertLess(stopped_after, 3.0, "not stopped within one ttl of the theft")
        self.assertEqual(self.server.cmd("GET", "k"), "other-holder")  # never deleted
        self.assertIn("lock lost", p.stderr.read())
        print(f"\n  stolen lock: command stopped {stopped_after * 1000:.0f} ms after SET (ttl 3s)")

    def test_deleted_lock_stops_the_command(self):
        p, pids = self.start_family(["--ttl", "3s"])
        self.server.cmd("DEL", "k")
        self.wait_all_dead(pids, 10)
        self.assertEqual(p.wait(timeout=10), 76)
        self.assert_no_lock("k")

    def test_on_lost_ignore_lets_the_command_finish(self):
        out = self.path("done")
        p = self.start(["run", "--ttl", "600ms", "--on-lost", "ignore", "k", "--",
                        "sh", "-c", f"sleep 1.5; echo done > {out}; exit 5"])
        wait_until(lambda: self.server.cmd("GET", "k"), 5, "lock taken")
        self.server.cmd("SET", "k", "other")
        self.assertEqual(p.wait(timeout=10), 5)
        self.assertTrue(os.path.exists(out))
        self.assertIn("--on-lost ignore", p.stderr.read())
        self.assertEqual(self.server.cmd("GET", "k"), "other")

    def test_rlock_killed_by_sigkill_takes_the_whole_group_down(self):
        p, pids = self.start_family([])
        p.kill()
        p.wait()
        self.wait_all_dead(pids, 5)

    def test_rlock_frozen_past_its_ttl_stops_the_command_when_it_wakes(self):
        p, pids = self.start_family(["--ttl", "1s"])
        p.send_signal(signal.SIGSTOP)
        # The key expires while rlock is frozen (the documented pause case) ...
        wait_until(lambda: self.server.cmd("EXISTS", "k") == 0, 10, "the key to expire")
        resumed_at = time.monotonic()
        p.send_signal(signal.SIGCONT)
        # ... and the moment rlock runs again, the command goes (SIGKILL, no grace: the key may
        # be someone else's already).
        self.wait_all_dead(pids, 5)
        self.assertLess(time.monotonic() - resumed_at, 1.0)
        self.assertEqual(p.wait(timeout=10), 76)


class RedisFaults(unittest.TestCase):
    """Each test breaks its own redis-server."""

    def setUp(self):
        self.server = RedisServer()
        import tempfile
        self.tmp = tempfile.mkdtemp(prefix="rlock-test-")

    def tearDown(self):
        self.server.stop()

    def start_family(self, ttl):
        pids = os.path.join(self.tmp, "pids")
        p = start_rlock(["run", "--ttl", ttl, "k", "--", "sh", "-c", FAMILY.format(pids=pids)],
                        self.server)
        self.addCleanup(lambda: (p.poll() is None and os.killpg(p.pid, signal.SIGKILL), p.wait(),
                                 p.stdout.close(), p.stderr.close()))
        wait_until(lambda: len(read_pids(pids)) == 3, 10, "the command and its helpers")
        return p, read_pids(pids)

    def assert_stopped_before_expiry(self, p, pids, broken_at, ttl_s):
        wait_until(lambda: not any(pid_alive(x) for x in pids), 3 * ttl_s + 5, "command to stop")
        stopped = time.monotonic() - broken_at
        # The last renewal was sent before the fault, so the key could expire on the server at
        # broken_at + ttl at the latest: the command must be gone by then.
        self.assertLess(stopped, ttl_s, f"command ran {stopped:.2f}s after the fault (ttl {ttl_s}s)")
        # Then one quick try to release and to record, not seconds of retries against a server
        # that is not there (it was 6 s: 3 for the release, 3 for the history).
        exited = wait_until(lambda: p.poll() is not None and time.monotonic(), 10, "rlock's exit")
        self.assertLess(exited - broken_at - stopped, 2.0, "rlock took long to exit after the loss")
        self.assertEqual(p.wait(timeout=10), 76)
        self.exit_after = exited - broken_at
        return stopped

    def test_redis_killed_mid_run(self):
        p, pids = self.start_family("2s")
        broken_at = time.monotonic()
        self.server.kill()
        stopped = self.assert_stopped_before_expiry(p, pids, broken_at, 2.0)
        self.assertIn("renewal failed", p.stderr.read())
        print(f"\n  redis killed: command stopped {stopped * 1000:.0f} ms after (ttl 2s), "
              f"rlock exited {self.exit_after * 1000:.0f} ms after")

    def test_redis_frozen_mid_run(self):
        p, pids = self.start_family("2s")
        broken_at = time.monotonic()
        self.server.freeze()
        try:
            stopped = self.assert_stopped_before_expiry(p, pids, broken_at, 2.0)
        finally:
            self.server.thaw()
        print(f"\n  redis frozen: command stopped {stopped * 1000:.0f} ms after (ttl 2s), "
              f"rlock exited {self.exit_after * 1000:.0f} ms after")

    def test_redis_back_within_the_lease_keeps_the_command_running(self):
        out = os.path.join(self.tmp, "done")
        p = start_rlock(["run", "--ttl", "3s", "k", "--", "sh", "-c", f"sleep 3; echo ok > {out}"],
                        self.server)
        self.addCleanup(lambda: (p.stdout.close(), p.stderr.close()))
        wait_until(lambda: self.server.cmd("GET", "k"), 5, "lock taken")
        self.server.freeze()
        time.sleep(0.4)  # the fault itself: a short stall, well inside the lease
        self.server.thaw()
        self.assertEqual(p.wait(timeout=15), 0, p.stderr.read())
        self.assertTrue(os.path.exists(out))


class Racers(RedisTestCase):
    def test_twenty_racers_with_wait_all_run_one_at_a_time(self):
        inside, log, bad = self.path("inside"), self.path("log"), self.path("overlap")
        # mkdir is atomic: it fails if another racer is inside.
        body = (f"mkdir {inside} 2>/dev/null || echo $$ >> {bad}; sleep 0.02; "
                f"rmdir {inside}; echo $RLOCK_FENCE >> {log}")
        racers = [self.start(["run", "-w", "60s", "--ttl", "5s", "race", "--", "sh", "-c", body],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                  for _ in range(20)]
        for r in racers:
            self.assertEqual(r.wait(timeout=120), 0)
        self.assertFalse(os.path.exists(bad), "two racers were inside at once")
        with open(log) as f:
            fences = [int(x) for x in f.read().split()]
        self.assertEqual(len(fences), 20)
        self.assertEqual(fences, sorted(fences))  # fences order the runs
        self.assertEqual(len(set(fences)), 20)
        self.assert_no_lock("race")


if __name__ == "__main__":
    unittest.main()
