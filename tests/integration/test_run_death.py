"""However rlock dies, the command's whole process group dies with it (rlock-run(1) LOGS).

The command here records its own pid and a background grandchild's; after rlock is killed, both
must be gone. How long they outlived rlock goes to $RLOCK_BUILD_DIR/death-report.txt.
"""
import os
import signal
import subprocess
import time
import unittest

from harness import (RLOCK, RedisTestCase, guardian_of, pid_alive, read_pids, rlock_env,
                     wait_until, write_report)

# Ignores TERM when asked (the job a `timeout -k` must KILL), starts a grandchild in its group,
# then publishes both pids at once (rename) and waits.
COMMAND = """
[ "$IGNORE_TERM" = 1 ] && trap '' TERM
sleep 300 &
echo $$ $! > {pids}.tmp && mv {pids}.tmp {pids}
wait
"""

REPORT = []


def tearDownModule():
    write_report("death-report.txt", REPORT, "how long the command's group outlived rlock, by way of killing it")


class CommandDiesWithRlock(RedisTestCase):
    def command(self, ignore_term=False):
        pids = self.path("pids")
        env = {"IGNORE_TERM": "1" if ignore_term else "0"}
        return ["sh", "-c", COMMAND.format(pids=pids)], env

    def command_pids(self, timeout=20):
        wait_until(lambda: len(read_pids(self.path("pids"))) == 2, timeout, "the command's pids")
        return read_pids(self.path("pids"))

    def assert_group_dies(self, pids, died_at, how):
        """Every pid of the command is gone soon after rlock died at DIED_AT (monotonic)."""
        wait_until(lambda: not any(pid_alive(p) for p in pids), 5,
                   f"the command's group to die after {how}", interval=0.002)
        outlived = time.monotonic() - died_at
        REPORT.append(f"{how}: {outlived * 1000:.1f} ms")
        # rlock-run(1) promises within a second; the bound is wide for loaded sanitizer builds.
        self.assertLess(outlived, 3, f"the command outlived rlock by {outlived:.1f}s ({how})")

    def run_under(self, wrapper, ignore_term=False):
        """Starts WRAPPER + rlock run in a session of its own; returns (Popen, command pids)."""
        argv, extra = self.command(ignore_term)
        env = rlock_env(self.server, **extra)
        p = subprocess.Popen(wrapper + [RLOCK, "run", "--ttl", "30s", "k", "--"] + argv, env=env,
                             start_new_session=True)
        self.procs.append(p)
        return p, self.command_pids()

    def test_timeout_with_sigkill(self):
        # coreutils timeout signals the command and its own whole process group: rlock and, before
        # this was fixed, its guardian.
        p, pids = self.run_under(["timeout", "-s", "KILL", "3"])
        self.assertEqual(p.wait(timeout=30), -signal.SIGKILL)  # timeout killed itself too
        self.assert_group_dies(pids, time.monotonic(), "timeout -s KILL")
        self.assertTrue(self.server.cmd("GET", "k"), "the lock is expected to stay until its ttl")

    def test_timeout_kill_after_with_a_job_that_ignores_term(self):
        p, pids = self.run_under(["timeout", "-k", "1", "2"], ignore_term=True)
        self.assertEqual(p.wait(timeout=30), -signal.SIGKILL)
        self.assert_group_dies(pids, time.monotonic(), "timeout -k 1 2, job ignoring TERM")

    def test_sigkill_to_rlocks_process_group(self):
        # supervisord's killasgroup, or `kill -KILL -PGID` in a script.
        argv, extra = self.command()
        p = self.start(["run", "k", "--"] + argv, env=rlock_env(self.server, **extra))
        pids = self.command_pids()
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        self.assert_group_dies(pids, time.monotonic(), "kill -KILL -PGID")

    def test_sigkill_to_rlock_alone(self):
        argv, extra = self.command()
        p = self.start(["run", "k", "--"] + argv, env=rlock_env(self.server, **extra))
        pids = self.command_pids()
        p.kill()
        p.wait(timeout=10)
        self.assert_group_dies(pids, time.monotonic(), "kill -KILL PID")

    def test_the_guardian_is_out_of_rlocks_group(self):
        argv, extra = self.command()
        p = self.start(["run", "k", "--"] + argv, env=rlock_env(self.server, **extra))
        self.command_pids()
        guardian, pgid = guardian_of(p.pid)
        self.assertEqual(pgid, guardian, "the guardian must lead a process group of its own")
        self.assertNotEqual(pgid, os.getpgid(p.pid))

    def test_a_killed_guardian_is_replaced(self):
        argv, extra = self.command()
        err = self.path("rlock.err")
        with open(err, "w") as f:
            p = self.start(["run", "k", "--"] + argv, env=rlock_env(self.server, **extra),
                           stderr=f)
        pids = self.command_pids()
        guardian, _ = guardian_of(p.pid)
        os.kill(guardian, signal.SIGKILL)
        wait_until(lambda: guardian_of(p.pid)[0] != guardian, 10, "a new guardian")
        # rlock says so once the new one runs: killed before that, it would not have said it.
        def said():
            with open(err) as f:
                return "guardian process ended" in f.read()
        wait_until(said, 10, "rlock's warning")
        p.kill()
        p.wait(timeout=10)
        self.assert_group_dies(pids, time.monotonic(), "guardian killed, then rlock")

    def test_rlock_and_guardian_killed_together_still_kill_the_command(self):
        # `pkill -KILL rlock` takes both; the kernel's parent-death signal still kills the command
        # itself (not what it started: rlock-run(1) says so).
        argv, extra = self.command()
        p = self.start(["run", "k", "--"] + argv, env=rlock_env(self.server, **extra))
        pids = self.command_pids()
        guardian, _ = guardian_of(p.pid)
        os.kill(guardian, signal.SIGSTOP)  # so that it cannot act before it is killed
        os.kill(p.pid, signal.SIGKILL)
        os.kill(guardian, signal.SIGKILL)
        died = time.monotonic()
        p.wait(timeout=10)
        wait_until(lambda: not pid_alive(pids[0]), 5, "the command to die with rlock")
        REPORT.append(f"rlock and guardian killed together: command itself gone after "
                      f"{(time.monotonic() - died) * 1000:.1f} ms")
        os.kill(pids[1], signal.SIGKILL)  # the documented survivor


if __name__ == "__main__":
    unittest.main()
