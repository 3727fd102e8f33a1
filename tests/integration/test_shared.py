"""Shared and exclusive locks (--shared, flock -s / -x): any number of shared holders at once, or
one holder alone; a waiter that wants the lock alone is not starved by shared ones.

Who is inside is checked with the kernel's help, as in the fault suite: each command is
tests/faults/section.cpp, which takes a flock of a probe file without blocking (LOCK_SH for a
shared holder, LOCK_EX for one alone) and logs an overlap when it cannot, and logs when it entered
and left on one monotonic clock.
"""
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
import unittest

from harness import RLOCK, RedisTestCase, rlock_env, wait_until

SECTION = os.environ.get("RLOCK_FAULT_SECTION") or os.path.join(
    os.path.dirname(RLOCK), "tests", "rlock_fault_section")
SEED = int(os.environ.get("RLOCK_SHARED_SEED") or random.SystemRandom().randrange(2**32))


class Sections:
    """The log of the sections of one test: [(kind, section pid, rlock pid, fence, t_ns)]."""

    def __init__(self, tmp):
        self.log = os.path.join(tmp, "sections.log")
        self.probe = os.path.join(tmp, "probe")
        os.mkdir(self.probe)

    def command(self, hold_ms, shared):
        return [SECTION, self.log, self.probe, "1", str(hold_ms)] + (["shared"] if shared else [])

    def lines(self):
        try:
            with open(self.log) as f:
                return [line.split() for line in f]
        except FileNotFoundError:
            return []

    def entered(self, rlock_pid):
        return [e for e in self.lines() if e[0] == "enter" and int(e[2]) == rlock_pid]

    def spans(self):
        """{rlock pid: (enter ns, exit ns, fence)} of the sections that ran to their end."""
        enter = {int(e[2]): (int(e[4]), int(e[3])) for e in self.lines() if e[0] == "enter"}
        out = {}
        for e in self.lines():
            if e[0] == "exit" and int(e[2]) in enter:
                start, fence = enter[int(e[2])]
                out[int(e[2])] = (start, int(e[4]), fence)
        return out

    def overlaps(self):
        return [e for e in self.lines() if e[0] == "overlap"]


class Shared(RedisTestCase):
    def setUp(self):
        super().setUp()
        self.sections = Sections(self.tmp)

    def places(self, key="k"):
        return self.server.cmd("ZCARD", "{%s}:rlock:shared" % key)

    def queue_length(self, key="k"):
        return self.server.cmd("ZCARD", "{%s}:rlock:queue" % key)

    def section(self, args, hold_ms, shared, **kw):
        """rlock run ARGS k -- a section that holds the probe HOLD_MS, shared or alone."""
        kw.setdefault("stdout", subprocess.DEVNULL)
        return self.start(["run"] + (["--shared"] if shared else []) + args + ["k", "--"] +
                          self.sections.command(hold_ms, shared), **kw)

    def assert_only_counters_left(self):
        # The fence counter, the history and its last success, and the ends of runs a re-sent
        # end would find, which go within a minute.
        def left():
            return sorted(k for k in self.server.cmd("KEYS", "*")
                          if not k.endswith((":rlock:fence", ":rlock:history", ":rlock:ended",
                                             ":rlock:last-success")))
        wait_until(lambda: not left(), 5, f"nothing but counters left (found {left()})")
        for k in self.server.cmd("KEYS", "*:rlock:ended"):
            self.assertTrue(0 < self.server.cmd("PTTL", k) <= 60000, k)

    def test_five_shared_holders_are_inside_together(self):
        # Each command marks itself in, then waits until it has seen all five marks (a barrier
        # with a deadline): none ends well unless all five were inside at once.
        marks = self.path("in")
        os.mkdir(marks)
        barrier = (f'echo "$RLOCK_FENCE" > {marks}/$RLOCK_TOKEN; '
                   f'for i in $(seq 400); do [ "$(ls {marks} | wc -l)" -ge 5 ] && exit 0; '
                   'sleep 0.05; done; exit 9')
        holders = [self.start(["run", "--shared", "k", "--", "sh", "-c", barrier])
                   for _ in range(5)]
        for p in holders:
            self.assertEqual(p.wait(timeout=60), 0, p.stderr.read())
        fences = set()
        for name in os.listdir(marks):
            with open(os.path.join(marks, name)) as f:
                fences.add(int(f.read()))
        self.assertEqual(len(fences), 5, "each acquisition draws a fence of its own")
        self.assert_only_counters_left()

    def test_an_exclusive_waiter_runs_alone_between_the_shared_holders_around_it(self):
        first = [self.section([], 3000, shared=True) for _ in range(2)]
        wait_until(lambda: all(self.sections.entered(p.pid) for p in first), 10,
                   "two shared holders inside")
        alone = self.section(["-w", "60s"], 200, shared=False)
        wait_until(lambda: self.queue_length() == 1, 10, "the exclusive waiter to queue")
        # A shared request after it queues behind it, though the lock is only shared now.
        later = self.section(["-w", "60s"], 200, shared=True)
        wait_until(lambda: self.queue_length() == 2, 10, "the later shared request to queue")
        r = self.run_rlock(["run", "--shared", "k", "--", "true"])
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertIn("a request for the lock alone came first", r.stderr)
        for p in first + [alone, later]:
            self.assertEqual(p.wait(timeout=60), 0, p.stderr.read())
        spans = self.sections.spans()
        x_in, x_out, x_fence = spans[alone.pid]
        for p in first:
            self.assertLess(spans[p.pid][1], x_in, "the exclusive holder entered beside them")
            self.assertLess(spans[p.pid][2], x_fence)
        self.assertGreater(spans[later.pid][0], x_out, "the later shared request went first")
        self.assertGreater(spans[later.pid][2], x_fence)
        self.assertEqual(self.sections.overlaps(), [])
        self.assert_only_counters_left()

    def test_a_stream_of_shared_holders_does_not_starve_an_exclusive_waiter(self):
        stop = threading.Event()
        stream = []

        def keep_sharing():  # a new shared holder every 100 ms, each inside for 400 ms
            while not stop.is_set():
                stream.append(self.section(["-w", "60s"], 400, shared=True,
                                           stderr=subprocess.DEVNULL))
                stop.wait(0.1)
        pump = threading.Thread(target=keep_sharing)
        pump.start()
        try:
            wait_until(lambda: self.places() >= 3, 10, "three shared holders at once")
            started = time.monotonic()
            alone = self.section(["-w", "8s"], 100, shared=False)
            status = alone.wait(timeout=30)
            took = time.monotonic() - started
        finally:
            stop.set()
            pump.join()
        print(f"\n  an exclusive waiter got in {took * 1000:.0f} ms into a stream of shared "
              "holders")
        self.assertEqual(status, 0, "starved by the shared holders: " + alone.stderr.read())
        self.assertLess(took, 5)
        for p in stream:
            self.assertEqual(p.wait(timeout=60), 0)
        self.assertEqual(self.sections.overlaps(), [])
        self.assert_only_counters_left()

    def test_a_race_of_shared_and_exclusive_holders(self):
        """Fault-suite style: racers, a third of them exclusive, some --fair, race for one key;
        the kernel probe must never see a holder alone beside anyone, and the fences must
        order every exclusive holder against everything before and after it."""
        rng = random.Random(SEED)
        print(f"\n  shared race seed {SEED} (rerun with RLOCK_SHARED_SEED={SEED})")
        racers = []
        while len(racers) < 60:
            if sum(1 for p, _ in racers if p.poll() is None) < 6:
                shared = rng.random() < 2 / 3
                args = ["-w", "60s", "--ttl", "2s"] + (["--fair"] if rng.random() < 0.3 else [])
                racers.append((self.section(args, rng.randint(10, 60), shared,
                                            stderr=subprocess.DEVNULL), shared))
            time.sleep(0.01)  # pacing of the spawns, not a synchronisation
        for p, _ in racers:
            self.assertEqual(p.wait(timeout=120), 0)
        self.assertEqual(self.sections.overlaps(), [], "the kernel saw an overlap")
        spans = self.sections.spans()
        self.assertEqual(len(spans), len(racers))
        alone = {p.pid for p, shared in racers if not shared}
        most_shared = 0
        for pid, (start, end, fence) in spans.items():
            beside = [(s, e, f) for other, (s, e, f) in spans.items()
                      if other != pid and s < end and start < e]
            if pid in alone:
                self.assertEqual(beside, [], f"a holder alone (fence {fence}) had company")
                for other, (s, e, f) in spans.items():
                    if e < start:
                        self.assertLess(f, fence, "a fence before the holder alone is greater")
                    if s > end:
                        self.assertGreater(f, fence, "a fence after the holder alone is smaller")
            else:
                most_shared = max(most_shared, 1 + len(beside))
        print(f"  {len(alone)} exclusive and {len(racers) - len(alone)} shared holders, "
              f"up to {most_shared} shared ones inside together")
        self.assertGreaterEqual(most_shared, 2, "the shared holders never shared")
        self.assertEqual(len({f for _, _, f in spans.values()}), len(spans))
        self.assert_only_counters_left()

    def test_one_release_lets_every_shared_waiter_in(self):
        token = self.run_rlock(["acquire", "--ttl", "60s", "k"]).stdout.strip()
        waiters = [self.section(["-w", "60s"], 1000, shared=True) for _ in range(3)]
        wait_until(lambda: self.queue_length() == 3, 10, "three shared waiters")
        released = time.monotonic()
        self.assertEqual(self.run_rlock(["release", "k", "--token", token]).returncode, 0)
        # The first is woken by the release, and wakes the next: not 60 s later, at the ttl.
        wait_until(lambda: self.places() == 3, 5, "the three shared waiters inside together")
        print(f"\n  three shared waiters in {(time.monotonic() - released) * 1000:.0f} ms "
              "after one release")
        for p in waiters:
            self.assertEqual(p.wait(timeout=30), 0)
        self.assertEqual(self.sections.overlaps(), [])

    def test_a_dead_exclusive_waiter_holds_shared_newcomers_up_2s_at_most(self):
        token = self.run_rlock(["acquire", "--shared", "--ttl", "60s", "k"]).stdout.strip()
        dead = self.start(["run", "-w", "60s", "k", "--", "true"])
        wait_until(lambda: self.queue_length() == 1, 10, "the exclusive waiter to queue")
        dead.kill()
        dead.wait()
        killed = time.monotonic()
        r = self.run_rlock(["run", "--shared", "-w", "30s", "k", "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        blocked = time.monotonic() - killed
        print(f"\n  shared newcomers were held up {blocked * 1000:.0f} ms by a SIGKILLed "
              "exclusive waiter")
        self.assertLess(blocked, 5, "the dead waiter held the shared lock up")  # 2 s by design
        self.assertEqual(self.run_rlock(["release", "k", "--token", token]).returncode, 0)
        self.assert_only_counters_left()

    def test_a_flag_given_false_is_off(self):
        token = self.run_rlock(["acquire", "--shared", "k"]).stdout.strip()
        r = self.run_rlock(["run", "--shared=false", "k", "--", "true"])
        self.assertEqual(r.returncode, 75, "--shared=false shared the lock: " + r.stderr)
        config = json.loads(self.run_rlock(["config", "--json", "--shared=no"]).stdout)
        self.assertEqual(config["settings"]["shared"]["value"], "false")
        self.assertEqual(self.run_rlock(["release", "k", "--token", token]).returncode, 0)

    def test_inside_a_shared_holder(self):
        # A nested shared run goes straight through on the outer place; one that wants the lock
        # alone does not upgrade it: it is busy, kept out by its own parent.
        inner = (f'{RLOCK} run --shared k -- sh -c "echo inner:\\$RLOCK_FENCE"; '
                 f'{RLOCK} run k -- true; echo alone:$?')
        r = self.run_rlock(["run", "--shared", "k", "--", "sh", "-c", inner], timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, f"inner:{self.server.cmd('GET', '{k}:rlock:fence')}\nalone:75\n")
        self.assert_only_counters_left()

    def test_status_inspect_list_and_json_show_each_shared_holder(self):
        holders = [self.start(["run", "--shared", "--ttl", "30s", "k", "--", "sleep", "60"],
                              env=rlock_env(self.server, RLOCK_HOSTNAME=f"web-{i}"))
                   for i in range(1, 4)]
        wait_until(lambda: self.places() == 3, 10, "three shared holders")
        alone = self.start(["run", "-w", "60s", "k", "--", "true"])
        wait_until(lambda: self.queue_length() == 1, 10, "an exclusive waiter")
        sharer = self.start(["run", "--shared", "-w", "60s", "k", "--", "true"])
        wait_until(lambda: self.queue_length() == 2, 10, "a shared waiter behind it")

        r = self.run_rlock(["status", "k"])
        print("\n  " + r.stdout.strip())
        self.assertEqual(r.returncode, 0, r.stderr)
        # Listed by the end of their places: in whatever order they started.
        self.assertRegex(r.stdout, r"^k  held  shared by 3 holders: web-\d pid \d+ \(sleep\), "
                                   r"web-\d pid \d+ \(sleep\), web-\d pid \d+ \(sleep\)  2 waiting")
        self.assertEqual(sorted(re.findall(r"web-\d", r.stdout)), ["web-1", "web-2", "web-3"])
        doc = json.loads(self.run_rlock(["status", "--json", "k"]).stdout)["locks"][0]
        self.assertEqual(doc["state"], "shared")
        self.assertEqual(doc["waiters"], 2)
        places = doc["shared_holders"]
        self.assertEqual(sorted(h["holder"]["host"] for h in places), ["web-1", "web-2", "web-3"])
        tokens = [h["token"] for h in places]
        self.assertEqual(sorted(tokens), sorted(self.server.cmd("ZRANGE", "{k}:rlock:shared", 0,
                                                                -1)))
        self.assertEqual(len({h["fence"] for h in places}), 3)
        for h in places:
            self.assertIsNone(h["holder_alive"])  # RLOCK_HOSTNAME: another host, to rlock
            self.assertGreater(h["ttl_ms"], 0)
            self.assertTrue(h["acquired_at"].endswith("Z"))

        r = self.run_rlock(["inspect", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("shared by      3 holders", r.stdout)
        for t in tokens:
            self.assertRegex(r.stdout, rf"holder +web-\d pid \d+ \(sleep\), ttl \S+, token {t}")
        self.assertRegex(r.stdout, r"1\. +token \w{8}\.\.\.  waiting")  # alone: no mark
        self.assertRegex(r.stdout, r"2\. +token \w{8}\.\.\. \(shared\)  waiting")
        doc = json.loads(self.run_rlock(["inspect", "--json", "k"]).stdout)
        self.assertEqual([w["shared"] for w in doc["queue"]], [False, True])
        self.assertEqual(len(doc["shared_holders"]), 3)

        for args in (["list"], ["list", "k*"]):
            r = self.run_rlock(args)
            self.assertRegex(r.stdout, r"^k  held  shared by 3 holders: ", args)
        listed = json.loads(self.run_rlock(["list", "--json"]).stdout)["locks"]
        self.assertEqual([(x["key"], x["state"], len(x["shared_holders"])) for x in listed],
                         [("k", "shared", 3)])
        for p in holders:
            os.killpg(p.pid, signal.SIGTERM)
        for p in holders + [alone, sharer]:
            self.assertIn(p.wait(timeout=30), (0, 143))
        self.assertEqual(self.run_rlock(["status", "k"]).returncode, 1)

    def test_acquire_shared_extend_and_release_by_token(self):
        t1, t2 = (self.run_rlock(["acquire", "--shared", "--ttl", "60s", "k"]).stdout.strip()
                  for _ in range(2))
        self.assertNotEqual(t1, t2)
        r = self.run_rlock(["acquire", "k"])
        self.assertEqual(r.returncode, 75)
        self.assertIn("busy, held by 2 shared holders; the last to end: ", r.stderr)
        r = self.run_rlock(["acquire", "--json", "--shared", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        t3 = json.loads(r.stdout)["token"]
        self.assertEqual(self.run_rlock(["extend", "k", "--token", t1, "--ttl", "90s"]).returncode,
                         0)
        self.assertGreater(int(self.server.cmd("ZSCORE", "{k}:rlock:shared", t1)),
                           int(self.server.cmd("ZSCORE", "{k}:rlock:shared", t2)))
        for t in (t1, t2):
            self.assertEqual(self.run_rlock(["release", "k", "--token", t]).returncode, 0)
            # Sent again (as after a reply lost to a closed connection): it finds the first.
            self.assertEqual(self.run_rlock(["release", "k", "--token", t]).returncode, 0)
        self.assertEqual(self.run_rlock(["release", "k", "--token", "0" * 32]).returncode, 1)
        self.assertEqual(self.run_rlock(["acquire", "k"]).returncode, 75)  # t3 still shares it
        self.assertEqual(self.run_rlock(["release", "k", "--token", t3]).returncode, 0)
        alone = self.run_rlock(["acquire", "k"]).stdout.strip()
        r = self.run_rlock(["acquire", "--shared", "k"])
        self.assertEqual(r.returncode, 75)
        self.assertIn("busy, held by ", r.stderr)
        self.assertEqual(self.run_rlock(["release", "k", "--token", alone]).returncode, 0)
        self.assert_only_counters_left()

    def test_release_force_on_shared_holders(self):
        t1, t2 = (self.run_rlock(["acquire", "--shared", "--ttl", "60s", "k"]).stdout.strip()
                  for _ in range(2))
        r = self.run_rlock(["release", "--force", "k"])
        self.assertEqual(r.returncode, 64)
        self.assertIn("k is shared by 2 holders: break one with --force --token T", r.stderr)
        r = self.run_rlock(["release", "--force", "--token", t1, "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"k shared place {t1}: broken", r.stdout)
        self.assertIn("Nobody can take the lock alone until that holder has stopped", r.stdout)
        self.assertIn(f"broken-{t1}", self.server.cmd("ZRANGE", "{k}:rlock:shared", 0, -1))
        # Its tombstone keeps a holder alone out, not another shared one.
        self.assertEqual(self.run_rlock(["acquire", "k"]).returncode, 75)
        t3 = self.run_rlock(["acquire", "--shared", "k"]).stdout.strip()
        r = self.run_rlock(["release", "--force", "--all", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"k shared place {t1}: already broken", r.stdout)
        self.assertEqual(r.stdout.count(": broken; it was held by"), 2)
        status = self.run_rlock(["status", "k"]).stdout
        self.assertEqual(status.count("broken ("), 3, status)
        self.assertEqual(self.run_rlock(["acquire", "k"]).returncode, 75)
        # The broken holders' own release ends their tombstones (t1's and t2's); --now the last.
        for t in (t1, t2):
            self.assertEqual(self.run_rlock(["release", "k", "--token", t]).returncode, 1)
        self.assertEqual(self.server.cmd("ZRANGE", "{k}:rlock:shared", 0, -1), [f"broken-{t3}"])
        r = self.run_rlock(["release", "--force", "--all", "--now", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        alone = self.run_rlock(["acquire", "k"])
        self.assertEqual(alone.returncode, 0, alone.stderr)

    def test_a_broken_shared_holder_stops_before_an_exclusive_waiter_enters(self):
        holder = self.section(["--ttl", "3s"], 30000, shared=True)
        wait_until(lambda: self.sections.entered(holder.pid), 10, "the shared holder inside")
        alone = self.section(["-w", "60s", "--ttl", "3s"], 100, shared=False)
        wait_until(lambda: self.queue_length() == 1, 10, "the exclusive waiter to queue")
        token = self.server.cmd("ZRANGE", "{k}:rlock:shared", 0, -1)[0]
        r = self.run_rlock(["release", "--force", "--token", token, "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(holder.wait(timeout=30), 76)
        self.assertEqual(alone.wait(timeout=30), 0)
        self.assertEqual(self.sections.overlaps(), [], "the exclusive holder entered beside it")
        self.assert_only_counters_left()


if __name__ == "__main__":
    unittest.main()
