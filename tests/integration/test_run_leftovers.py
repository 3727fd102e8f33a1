"""What the command leaves running in its process group (`cmd &` without a wait) keeps the lock,
as flock(1) keeps its lock while any process that inherited it lives; --leftovers kill stops it.
A zombie is no leftover: rlock never waits for one."""
import os
import re
import signal
import time
import unittest

from harness import RedisTestCase, pid_alive, read_pids, rlock_env, wait_until

# Leaves a process that runs until the file GO exists, records its pid, and exits STATUS.
LEAVE_ONE = """
(trap '' TERM; [ "$IGNORE_TERM" = 1 ] || trap - TERM
 while [ ! -e {go} ]; do sleep 0.02; done) &
echo $! > {pids}
exit {status}
"""


class Leftovers(RedisTestCase):
    def leave_one(self, status=0, ignore_term=False, args=(), **kw):
        go, pids = self.path("go"), self.path("pids")
        env = rlock_env(self.server, IGNORE_TERM="1" if ignore_term else "0")
        p = self.start(["run", *args, "k", "--", "sh", "-c",
                        LEAVE_ONE.format(go=go, pids=pids, status=status)], env=env, **kw)
        pid = wait_until(lambda: read_pids(pids), 10, "the leftover's pid")[0]
        return p, pid

    def test_the_lock_is_held_until_the_leftover_exits(self):
        p, leftover = self.leave_one(status=3, args=["--ttl", "1s"])
        # Past several ttls: the lock is renewed for the leftover, and rlock has not exited.
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            self.assertIsNone(p.poll(), "rlock exited while its command's leftover ran")
            self.assertIsNotNone(self.server.cmd("GET", "k"), "the lock went while a leftover ran")
            time.sleep(0.05)
        self.assertTrue(pid_alive(leftover))
        open(self.path("go"), "w").close()
        self.assertEqual(p.wait(timeout=10), 3)  # the command's own status
        self.assert_no_lock("k")
        self.assertFalse(pid_alive(leftover))

    def test_a_second_host_cannot_run_beside_a_leftover(self):
        p, _ = self.leave_one()
        r = self.run_rlock(["run", "k", "--", "true"])
        self.assertEqual(r.returncode, 75, r.stderr)
        open(self.path("go"), "w").close()
        self.assertEqual(p.wait(timeout=10), 0)

    def test_verbose_says_how_many_it_waits_for(self):
        said = (r"rlock: k: the command exited; holding the lock until the \d+ process(es)? it "
                r"left in its process group exit \(--leftovers kill stops them\)")
        with open(self.path("stderr"), "w") as err:
            p, _ = self.leave_one(args=["-v"], stderr=err)
        # The leftover goes on until rlock has said so (it looks at the group once it has
        # reaped the command, which a loaded machine may delay).
        def said_it():
            with open(self.path("stderr")) as f:
                return re.search(said, f.read())
        wait_until(said_it, 10, "the leftovers line")
        self.assertIsNone(p.poll())
        open(self.path("go"), "w").close()
        self.assertEqual(p.wait(timeout=10), 0)

    def test_quiet_without_a_terminal_or_v(self):
        p, _ = self.leave_one()
        open(self.path("go"), "w").close()
        self.assertEqual(p.wait(timeout=10), 0)
        self.assertEqual(p.stderr.read(), "")

    def test_leftovers_kill_stops_them_and_releases(self):
        p, leftover = self.leave_one(status=5, args=["--leftovers", "kill", "--kill-after", "300ms"],
                                     ignore_term=True)
        self.assertEqual(p.wait(timeout=10), 5)
        self.assertFalse(pid_alive(leftover), "--leftovers kill left it running")
        self.assert_no_lock("k")

    def test_leftovers_kill_from_the_config_file(self):
        config = self.path("config.toml")
        with open(config, "w") as f:
            f.write('leftovers = "kill"\n')
        go, pids = self.path("go"), self.path("pids")
        p = self.start(["run", "k", "--", "sh", "-c", LEAVE_ONE.format(go=go, pids=pids, status=0)],
                       env=rlock_env(self.server, RLOCK_CONFIG=config, IGNORE_TERM="0"))
        self.assertEqual(p.wait(timeout=10), 0)
        self.assertFalse(pid_alive(read_pids(pids)[0]))

    def test_a_lost_lock_stops_the_leftovers(self):
        p, leftover = self.leave_one(args=["--ttl", "1s"])
        self.server.cmd("SET", "k", "someone else")
        self.assertEqual(p.wait(timeout=10), 76)
        self.assertFalse(pid_alive(leftover), "a leftover ran on after the lock was lost")

    def test_max_run_stops_the_leftovers(self):
        p, leftover = self.leave_one(args=["--max-run", "500ms", "--kill-after", "200ms"])
        self.assertEqual(p.wait(timeout=10), 124)
        self.assertFalse(pid_alive(leftover))

    def test_rlocks_death_stops_the_leftovers(self):
        p, leftover = self.leave_one()
        wait_until(lambda: p.poll() is None and self.server.cmd("GET", "k"), 5, "the lock")
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        wait_until(lambda: not pid_alive(leftover), 3, "the guardian to stop the leftover")

    def test_a_signal_to_rlock_reaches_the_leftovers(self):
        with open(self.path("stderr"), "w") as err:
            p, leftover = self.leave_one(args=["-v"], stderr=err)
        # Signalled once the command has exited (a loaded machine may still be running its
        # `exit 0` when the leftover's pid is written): then only the leftover is there to stop.
        def exited():
            with open(self.path("stderr")) as f:
                return "the command exited; holding the lock" in f.read()
        wait_until(exited, 10, "rlock to see the command exit")
        os.kill(p.pid, signal.SIGTERM)
        wait_until(lambda: not pid_alive(leftover), 5, "the leftover to get TERM")
        self.assertEqual(p.wait(timeout=10), 0)  # the command's status: it exited 0 before
        self.assert_no_lock("k")

    def test_a_zombie_in_the_group_is_not_waited_for(self):
        # The command starts P (which leaves the group with setsid, and never reaps its child C)
        # and C (in the group), then exits. C exits: a zombie in the group for as long as P lives,
        # as in a container whose PID 1 never reaps. rlock must not wait for it.
        zombie = self.path("zombie")
        script = f"""
import os, sys, time
pid = os.fork()
if pid == 0:
    c = os.fork()
    if c == 0:
        os._exit(0)                  # C: in the group, becomes a zombie P never reaps
    os.setsid()                      # P: out of the group
    open("{zombie}", "w").write(f"{{os.getpid()}} {{c}}\\n")
    time.sleep(60)
    os._exit(0)
while not os.path.exists("{zombie}"):
    time.sleep(0.01)
"""
        p = self.start(["run", "k", "--", "python3", "-c", script])
        try:
            self.assertEqual(p.wait(timeout=10), 0)
        finally:
            parent = read_pids(zombie)[:1]
            for pid in parent:
                os.kill(pid, signal.SIGKILL)
        self.assert_no_lock("k")


if __name__ == "__main__":
    unittest.main()
