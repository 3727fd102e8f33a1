"""rlock logs -f through what a run rides through (man rlock, "logs"): a proxy that cuts idle
connections, a restart with the data kept, a restart that lost it. -f shows every line once and
ends with the run; an outage is said once with the bound -f waits for, and said over; output
that Redis lost is said as lost, by the follower and by the run's rlock.

The command prints a line, then waits for a file before the next: the faults happen between
lines, at points the test chooses, not at moments it guesses."""
import os
import select
import shutil
import subprocess
import unittest

from harness import (RLOCK, CommandRefusingProxy, IdleClosingProxy, RedisTestCase,
                     rlock_env, wait_until)

KEY = "lock:job"
INDEX = "rlock-output:{lock:job}:rlock:outputs"
LINES = 4
# Prints line1 .. lineN, each once the file goN-1 exists, then exits 3.
JOB = ('i=1; while [ $i -le %d ]; do echo line$i; i=$((i+1)); '
       'while [ ! -e "$T/go$i" ] && [ $i -le %d ]; do sleep 0.02; done; done; exit 3'
       % (LINES, LINES))


class Follow(RedisTestCase):
    server_args = ("--appendonly", "yes", "--appendfsync", "always")

    def setUp(self):
        super().setUp()
        if self.server.proc.poll() is not None:  # a test that ended with it down
            self.server.start(port=self.server.port)

    def start_job(self, ttl="30s"):
        job = self.start(["run", "--ttl", ttl, "--keep-output", "64k", KEY, "-c", JOB],
                         env=rlock_env(self.server, T=self.tmp), stdout=subprocess.DEVNULL)
        wait_until(lambda: self.server.cmd("ZCARD", INDEX), what="the run's output kept")
        return job

    def follow(self, url=None):
        env = rlock_env(self.server, **({"RLOCK_REDIS_URL": url} if url else {}))
        err = open(self.path("follow.err"), "w")
        self.addCleanup(err.close)
        follow = subprocess.Popen([RLOCK, "logs", "-f", KEY], env=env, stdout=subprocess.PIPE,
                                  stderr=err, start_new_session=True)
        self.procs.append(follow)
        return follow

    def said(self):
        """What -f said so far on stderr."""
        with open(self.path("follow.err")) as f:
            return f.read()

    def line(self, follow, timeout=20):
        ready, _, _ = select.select([follow.stdout], [], [], timeout)
        self.assertTrue(ready, f"logs -f showed no line within {timeout}s")
        return follow.stdout.readline().decode()

    def next_line(self, n):
        with open(self.path(f"go{n}"), "w"):
            pass

    def ended(self, follow, job):
        """Lets the job print its last lines; -f's exit status and stderr."""
        self.assertEqual(job.wait(timeout=30), 3)
        status = follow.wait(timeout=30)
        return status, self.said()

    def test_idle_cuts_by_a_proxy_are_ridden_through_without_a_word(self):
        # HAProxy's `timeout client` closes a connection quiet for 1s; -f waits on the server
        # longer than that for the next line.
        proxy = IdleClosingProxy(self.server.port, idle=1.0)
        self.addCleanup(proxy.close)
        job = self.start_job()
        follow = self.follow(proxy.url)
        self.assertEqual(self.line(follow), "line1\n")
        for n in range(2, LINES + 1):
            cuts = proxy.closed
            wait_until(lambda: proxy.closed > cuts, 10, "the proxy to cut -f's idle connection")
            self.next_line(n)
            self.assertEqual(self.line(follow), f"line{n}\n")
        status, err = self.ended(follow, job)
        self.assertEqual(status, 0, err)
        self.assertIn(f"{KEY}: the run ended: exit 3", err)
        self.assertNotIn("unreachable", err)
        self.assertEqual(follow.stdout.read(), b"", "a line shown twice")

    def test_a_cut_before_the_run_printed_anything_is_no_lost_output(self):
        # The run has no output stream until its first line, only its place among the kept runs.
        proxy = IdleClosingProxy(self.server.port, idle=1.0)
        self.addCleanup(proxy.close)
        job = self.start(["run", "--keep-output", "64k", KEY, "-c",
                          'while [ ! -e "$T/go1" ]; do sleep 0.02; done; echo line1'],
                         env=rlock_env(self.server, T=self.tmp), stdout=subprocess.DEVNULL)
        wait_until(lambda: self.server.cmd("ZCARD", INDEX), what="the run's output kept")
        follow = self.follow(proxy.url)
        wait_until(lambda: proxy.closed >= 2, 20, "the proxy to cut -f's idle connection twice")
        self.next_line(1)
        self.assertEqual(self.line(follow), "line1\n")
        self.assertEqual(job.wait(timeout=30), 0)
        self.assertEqual(follow.wait(timeout=30), 0, self.said())
        self.assertNotIn("lost", self.said())
        self.assertNotIn("unreachable", self.said())

    @unittest.skipIf(os.environ.get("RLOCK_SANITIZE"), "30s of waiting: run in the plain build")
    def test_a_proxy_that_cuts_every_blocking_read_is_an_outage_with_a_bound(self):
        # As twemproxy does with the commands it does not pass: each XREAD closes the
        # connection at once. Not an idle cut to be replaced at once for ever, but an outage:
        # said, paused, and given up on at its bound.
        proxy = CommandRefusingProxy(self.server.port, {"XREAD"})
        self.addCleanup(proxy.close)
        job = self.start_job()
        # line1 in Redis before -f starts: it reads what is kept with XRANGE, which passes, and
        # would wait for a later line1 with XREAD, which this proxy cuts.
        wait_until(lambda: "line1" in self.run_rlock(["logs", KEY]).stdout, 20,
                   "line1 kept in Redis")
        follow = self.follow(proxy.url)
        self.assertEqual(self.line(follow), "line1\n")  # read with XRANGE, which passes
        self.assertEqual(follow.wait(timeout=90), 69, self.said())
        self.assertIn("following on once it answers, for up to 35s", self.said())
        self.assertIn("Redis unreachable for 35s", self.said())
        # Paused between tries (up to 2s each), not a loop of reconnections.
        self.assertGreater(proxy.refusals, 1)
        self.assertLess(proxy.refusals, 100)
        self.assertIsNone(job.poll())

    def test_after_an_outage_the_bytes_not_shown_are_found_where_redis_now_keeps_them(self):
        # Where -f comes back to may keep the output in other entries than those it read: a
        # replica that lagged, promoted by a failover, took the run's rlock's resend of the last
        # lines as one entry that begins before the last entry -f showed. Made here on one server,
        # while only -f is cut off from it (its proxy refuses), so that when the run's rlock
        # sends line3 the script keeps nothing twice.
        proxy = IdleClosingProxy(self.server.port, idle=600)
        self.addCleanup(proxy.close)
        job = self.start_job()
        follow = self.follow(proxy.url)
        self.assertEqual(self.line(follow), "line1\n")
        self.next_line(2)
        self.assertEqual(self.line(follow), "line2\n")
        proxy.refusing = True
        wait_until(lambda: "Redis unreachable" in self.said(), 20, "-f to say Redis is unreachable")
        stream = next(k for k in self.server.cmd("KEYS", "*") if k.endswith(
            ":rlock:output-" + self.server.cmd("ZRANGE", INDEX, 0, 0)[0].split()[0]))
        self.assertEqual(self.server.cmd("XRANGE", stream, "-", "+"),
                         [["0-1", ["o", "line1\n"]], ["6-1", ["o", "line2\n"]]])
        self.server.cmd("DEL", stream)  # an ID below a stream's top cannot be added
        self.server.cmd("XADD", stream, "0-1", "o", "line1\n")
        self.server.cmd("XADD", stream, "6-1", "o", "line2\nline3\n")
        self.next_line(3)
        self.next_line(4)
        proxy.refusing = False
        self.assertEqual(self.line(follow), "line3\n")
        self.assertEqual(self.line(follow), "line4\n")
        status, err = self.ended(follow, job)
        self.assertEqual(status, 0, err)
        self.assertNotIn("not kept", err)
        self.assertEqual(follow.stdout.read(), b"", "a line shown twice")

    def test_a_restart_that_keeps_the_data_is_said_and_every_line_shown_once(self):
        job = self.start_job()
        follow = self.follow()
        self.assertEqual(self.line(follow), "line1\n")
        self.next_line(2)
        self.assertEqual(self.line(follow), "line2\n")
        self.server.kill()
        self.next_line(3)  # printed while Redis is down: the run's rlock sends it once it is up
        wait_until(lambda: "Redis unreachable" in self.said(), 20, "-f to say Redis is unreachable")
        self.server.start(port=self.server.port)
        self.assertEqual(self.line(follow), "line3\n")
        self.next_line(4)
        self.assertEqual(self.line(follow), "line4\n")
        status, err = self.ended(follow, job)
        self.assertEqual(status, 0, err)
        self.assertIn("Redis answers again after", err)
        self.assertIn(f"{KEY}: the run ended: exit 3", err)
        self.assertEqual(follow.stdout.read(), b"", "a line shown twice")

    def test_a_restart_without_the_data_is_said_as_lost_output(self):
        job = self.start_job(ttl="3s")
        follow = self.follow()
        self.assertEqual(self.line(follow), "line1\n")
        self.server.kill()
        shutil.rmtree(os.path.join(self.server.dir, "appendonlydir"))
        self.server.start(port=self.server.port)
        self.next_line(2)
        self.assertEqual(follow.wait(timeout=30), 1, self.said())
        err = self.said()
        self.assertIn(f"{KEY}: Redis lost the run's output while it was away", err)
        # The run lost its lock with the data (76); its rlock names the cause of the lost
        # output, not newer runs.
        self.assertEqual(job.wait(timeout=30), 76)
        run_err = job.stderr.read()
        self.assertIn("Redis lost the run's output", run_err)
        self.assertNotIn("newer runs", run_err)


if __name__ == "__main__":
    unittest.main()
