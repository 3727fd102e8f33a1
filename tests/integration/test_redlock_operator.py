"""The operator's verbs under Redlock, as trustworthy as run under the same faults: five
independent masters (a quorum is 3), one of them frozen, killed, or restarted without its data.
Reads answer by quorum and name the nodes that did not answer, without waiting a command
timeout for one that is frozen; writes (pause, resume, stop) count only with a quorum."""
import json
import os
import signal
import time
import unittest

from harness import RedisServer, rlock_env, run_rlock, start_rlock, stop_procs, wait_until
from test_watch import JsonLines

KEY = "lock:report"
# Long enough that the holder does not renew while a test takes copies away by hand: a
# renewal that found its copy gone on a quorum would end the run the test reads.
HOLD = ["--ttl", "60s"]


class RedlockOperator(unittest.TestCase):

    def setUp(self):
        self.servers = [RedisServer() for _ in range(5)]
        self.urls = []
        for s in self.servers:
            self.urls += ["--redis", s.url]
        self.procs = []

    def tearDown(self):
        stop_procs(self.procs)
        for s in self.servers:
            s.stop()

    def rlock(self, verb, *args, **kw):
        return run_rlock([verb] + self.urls + list(args), env=rlock_env(None), **kw)

    def start(self, verb, *args):
        p = start_rlock([verb] + self.urls + list(args), env=rlock_env(None))
        self.procs.append(p)
        return p

    def copies(self, key=KEY):
        return [s.cmd("GET", key) if s.proc.poll() is None else None for s in self.servers]

    def hold(self, *command):
        """A run that holds KEY on every master, running COMMAND (sleep 60 by default)."""
        p = self.start("run", *HOLD, KEY, "--", *(command or ("sleep", "60")))
        wait_until(lambda: all(self.copies()), 10, "the lock on all five masters")
        return p

    def timed(self, verb, *args):
        begin = time.monotonic()
        r = self.rlock(verb, "--command-timeout", "5s", *args)
        return r, time.monotonic() - begin

    def test_held_on_a_quorum_is_held_though_the_first_node_lost_it(self):
        self.hold()
        self.servers[0].cmd("DEL", KEY)  # as a restart without data would
        r = self.rlock("status", KEY)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, rf"^{KEY}\s+held\s+by .*\[on 4 of 5 nodes\]$")
        j = json.loads(self.rlock("inspect", "--json", KEY).stdout)
        self.assertEqual(j["state"], "held")
        self.assertEqual((j["nodes"]["total"], j["nodes"]["answered"], j["nodes"]["agree"]),
                         (5, 5, 4))

    def test_held_on_fewer_than_a_quorum_is_free_and_said_so(self):
        self.hold()
        for s in self.servers[:3]:
            s.cmd("DEL", KEY)
        r = self.rlock("status", KEY)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"free\s+\[on 3 of 5 nodes; held on 2 by .* not a quorum\]")
        i = self.rlock("inspect", KEY)
        self.assertEqual(i.returncode, 1, i.stderr)
        j = json.loads(self.rlock("status", "--json", KEY).stdout)["locks"][0]
        self.assertEqual(j["state"], "free")
        self.assertEqual(j["nodes"]["held_without_quorum"]["nodes"], 2)
        self.assertIn("rlock/1 ", j["nodes"]["held_without_quorum"]["value"])

    def test_held_on_too_few_to_tell_while_nodes_are_away_is_unknown(self):
        # One node holds it, two do not, two do not answer: those two may hold it too, and
        # with them a quorum would. Neither "held" nor "free" is known: shown so, exit 69; a
        # verb that acts on the state (check) fails, saying why.
        self.hold()
        for s in self.servers[3:]:
            s.kill()
        for s in self.servers[1:3]:
            s.cmd("DEL", KEY)
        r = self.rlock("status", KEY)
        self.assertEqual(r.returncode, 69, r.stdout + r.stderr)
        self.assertRegex(r.stdout, rf"^{KEY}\s+unknown\s+\[on 2 of 5 nodes; held on 1 by .*, a "
                         r"quorum with the nodes that did not answer\?; no answer from ")
        self.assertEqual(json.loads(self.rlock("inspect", "--json", KEY).stdout)["state"],
                         "unknown")
        listed = self.rlock("list")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertRegex(listed.stdout, rf"^{KEY}\s+unknown\s")
        c = self.rlock("check", KEY, "--every", "1h")
        self.assertEqual(c.returncode, 69, c.stdout + c.stderr)
        self.assertIn(f"{KEY}: held on 1 of 5 Redlock nodes, and 2 did not answer: whether a "
                      "quorum holds it is not known", c.stderr)

    def test_reads_with_the_first_node_frozen_and_another_killed(self):
        self.hold()
        self.servers[0].freeze()
        self.addCleanup(self.servers[0].thaw)
        self.servers[1].kill()
        for verb in ("status", "inspect"):
            r, took = self.timed(verb, KEY)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("on 3 of 5 nodes", r.stdout)
            # The frozen node is not waited for: a quorum answered, and it had a moment more.
            self.assertLess(took, 2.5, f"{verb} waited for the frozen node")
            for s in self.servers[:2]:
                self.assertIn(f"127.0.0.1:{s.port}", r.stderr)
        j = json.loads(self.rlock("status", "--json", KEY).stdout)["locks"][0]
        self.assertEqual(j["nodes"]["answered"], 3)
        self.assertEqual(sorted(j["nodes"]["unanswered"]),
                         sorted(f"redis://127.0.0.1:{s.port}" for s in self.servers[:2]))

    def test_list_reads_by_quorum(self):
        self.hold()
        self.servers[1].kill()
        self.servers[0].cmd("DEL", KEY)  # the first node lost its copy: three still hold it
        r = self.rlock("list")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, rf"^{KEY}\s+held\s+by .*\[on 3 of 5 nodes; no answer from ")
        self.assertIn(f"127.0.0.1:{self.servers[1].port}", r.stderr)

    def test_fewer_than_a_quorum_answering_is_unreachable(self):
        self.hold()
        for s in self.servers[2:]:
            s.kill()
        for verb in ("status", "inspect"):
            r = self.rlock(verb, KEY)
            self.assertEqual(r.returncode, 69, r.stdout + r.stderr)
            self.assertIn("2 of 5 Redlock nodes answered, fewer than a quorum (3)", r.stderr)
            self.assertEqual(r.stdout, "")

    def test_pause_without_a_quorum_is_taken_back_and_the_pause_before_restored(self):
        first = self.rlock("pause", KEY, "--for", "10m", "--reason", "first")
        self.assertEqual(first.returncode, 0, first.stderr)
        before = self.copies("{" + KEY + "}:rlock:pause")
        self.assertTrue(all("reason=first" in p for p in before), before)
        for s in self.servers[2:]:
            s.kill()
        r = self.rlock("pause", KEY, "--for", "1h", "--reason", "second")
        self.assertEqual(r.returncode, 69, r.stdout + r.stderr)
        self.assertIn("2 of 5 Redlock nodes took the pause, fewer than a quorum (3)", r.stderr)
        self.assertEqual(r.stdout, "")
        # The first pause again (a node's own, or one written the same ms by another's clock),
        # with most of its ten minutes left.
        for s in self.servers[:2]:
            self.assertIn(s.cmd("GET", "{" + KEY + "}:rlock:pause"), before)
            self.assertGreater(s.cmd("PTTL", "{" + KEY + "}:rlock:pause"), 500_000)

    def test_a_pause_without_a_quorum_keeps_no_run_out_once_the_nodes_are_back(self):
        for s in self.servers[2:]:
            s.kill()
        r = self.rlock("pause", KEY, "--for", "1h")
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertEqual(self.copies("{" + KEY + "}:rlock:pause")[:2], [None, None])
        for s in self.servers[2:]:
            s.restart()  # without data, as after a crash
        run = self.rlock("run", KEY, "--", "true")
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_pause_and_resume_with_a_quorum_and_without(self):
        self.servers[0].freeze()
        self.addCleanup(self.servers[0].thaw)
        self.servers[1].kill()
        p, took = self.timed("pause", KEY, "--for", "10m")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(took, 2.5, "pause waited for the frozen node")
        self.assertIn(f"127.0.0.1:{self.servers[1].port}", p.stderr)  # named
        self.assertEqual(self.rlock("run", KEY, "--", "true").returncode, 75)
        r, took = self.timed("resume", KEY)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(took, 2.5, "resume waited for the frozen node")
        self.assertEqual(self.rlock("run", KEY, "--", "true").returncode, 0)
        self.assertEqual(self.rlock("pause", KEY, "--for", "10m").returncode, 0)
        self.servers[2].kill()
        r = self.rlock("resume", KEY)
        self.assertEqual(r.returncode, 69, r.stdout + r.stderr)
        self.assertIn("fewer than a quorum (3)", r.stderr)

    def test_history_shows_every_attempt_of_a_retried_run(self):
        r = self.rlock("run", KEY, "--retry", "2", "--retry-delay", "100ms", "--", "false")
        self.assertEqual(r.returncode, 1, r.stderr)
        runs = json.loads(self.rlock("history", "--json", KEY).stdout)["runs"]
        self.assertEqual([run["attempt"] for run in runs], [3, 2, 1], runs)

    def test_history_and_check_with_the_first_node_frozen_and_another_killed(self):
        self.servers[0].freeze()
        self.addCleanup(self.servers[0].thaw)
        self.servers[1].kill()
        run = self.rlock("run", KEY, "--", "true")  # recorded on a node that answers
        self.assertEqual(run.returncode, 0, run.stderr)
        h, took = self.timed("history", "--json", KEY)
        self.assertEqual(h.returncode, 0, h.stderr)
        self.assertEqual(len(json.loads(h.stdout)["runs"]), 1)
        self.assertLess(took, 2.5, "history waited for the frozen node")
        c, took = self.timed("check", KEY, "--every", "1h")
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
        self.assertIn(f"no answer from redis://127.0.0.1:{self.servers[0].port}", c.stdout)
        self.assertLess(took, 2.5, "check waited for the frozen node")

    def stop_while(self, fault):
        holder = self.hold()
        fault()
        r, took = self.timed("stop", KEY)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, rf"^{KEY}: stopped .*; the lock was given back after ")
        self.assertLess(took, 5, "stop waited on a node that does not answer")
        self.assertEqual(holder.wait(timeout=10), 80)  # stopped by rlock stop

    def test_stop_with_the_first_node_frozen_and_another_killed(self):
        def fault():
            self.servers[0].freeze()
            self.addCleanup(self.servers[0].thaw)
            self.servers[1].kill()
        self.stop_while(fault)

    def test_stop_with_two_nodes_killed(self):
        def fault():
            self.servers[0].kill()
            self.servers[3].kill()
        self.stop_while(fault)

    def test_watch_tells_only_what_the_quorum_saw(self):
        watch = JsonLines(self.start("watch", "--json", KEY))
        watch.event("state")
        done = os.path.join(self.servers[0].dir, "done")  # a directory of the test's own
        p = self.start("run", "--ttl", "3s", KEY, "--", "sh", "-c",
                       f"while [ ! -e {done} ]; do sleep 0.05; done")
        watch.event("taken")
        # Each node drew its own fence: the value shown is the largest's, and with that node
        # frozen it is another node's, another value of the same holder.
        fences = [int(s.cmd("GET", "{" + KEY + "}:rlock:fence")) for s in self.servers]
        largest, second, third = sorted(self.servers, key=lambda s: -fences[self.servers.index(s)])[:3]
        largest.freeze()
        self.addCleanup(largest.thaw)
        second.kill()
        # A renewal with the faults in place (one a second): the watch, which polls (Redlock
        # sends no notifications), has looked several times meanwhile.
        seen = [third.cmd("PTTL", KEY)]

        def renewed():  # the time left goes down between renewals, up at one
            now, before = third.cmd("PTTL", KEY), seen[0]
            seen[0] = now
            return now > before

        wait_until(renewed, 10, "a renewal", interval=0.05)
        open(done, "w").close()
        self.assertEqual(p.wait(timeout=10), 0)
        watch.event("released")
        watch.proc.send_signal(signal.SIGINT)
        self.assertEqual(watch.proc.wait(timeout=10), 0)
        watch.thread.join(timeout=10)
        kinds = [json.loads(line)["event"] for line in watch.seen]
        while not watch.queue.empty():
            line = watch.queue.get()
            if line is not None:
                kinds.append(json.loads(line)["event"])
        # Taken once and released once: no release of a value that another node's copy
        # replaced, no new holder, no outage.
        self.assertEqual(kinds, ["watching", "state", "taken", "released"])


if __name__ == "__main__":
    unittest.main()
