"""rlock watch: one line (or JSON object) per change of a lock, until interrupted. The same
scripted lock life (acquire, extend, release; a lock left to expire; a waiter queued behind a
holder whose lock is broken by force, then served) is watched with keyspace notifications on
the test's own server and without them (polling), and must read the same."""
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (REDIS_SENTINEL, RLOCK, IdleClosingProxy, RedisClient, RedisServer,
                     RedisTestCase, free_port, key_per_master, start_cluster,
                     rlock_env, run_rlock, server_binary, start_rlock, stop_procs, wait_until)

KEY = "lock:life"


class Lines:
    """The lines a process prints on stdout, read by a thread so that a test can wait for one
    with a deadline."""

    def __init__(self, proc):
        self.proc = proc
        self.queue = queue.Queue()
        self.seen = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.queue.put(line.rstrip("\n"))
        self.queue.put(None)

    def next(self, timeout=10):
        try:
            line = self.queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line in {timeout}s; seen: {self.seen}") from None
        if line is None:
            raise AssertionError(f"watch ended; seen: {self.seen}")
        self.seen.append(line)
        return line

    def until(self, predicate, timeout=15, what="line"):
        """Lines up to and including the first for which PREDICATE is true."""
        deadline = time.monotonic() + timeout
        out = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}; seen: {self.seen}")
            line = self.next(left)
            out.append(line)
            if predicate(line):
                return out


class JsonLines(Lines):
    def next(self, timeout=10):
        return json.loads(super().next(timeout))

    def event(self, kind, timeout=15):
        """The events up to and including the first of KIND."""
        return self.until(lambda e: e["event"] == kind, timeout, kind)


class WatchMixin:
    """The tests of both modes; a subclass sets NOTIFY (notify-keyspace-events) and MODE."""

    NOTIFY = ""
    MODE = ""

    def setUp(self):
        super().setUp()
        self.server.cmd("CONFIG", "SET", "notify-keyspace-events", self.NOTIFY)

    def watch(self, *keys, json_lines=True):
        proc = self.start(["watch"] + (["--json"] if json_lines else []) + list(keys))
        return (JsonLines if json_lines else Lines)(proc)

    def interrupt(self, lines, sig=signal.SIGINT):
        lines.proc.send_signal(sig)
        self.assertEqual(lines.proc.wait(timeout=10), 0)
        self.assertEqual(lines.proc.stderr.read(), "")

    def test_first_line_names_the_mode_and_sigint_ends_it_with_0(self):
        lines = self.watch(KEY, "lock:other", json_lines=False)
        first = lines.next()
        if self.MODE == "notifications":
            self.assertEqual(first, 'watching lock:life, lock:other by keyspace notifications '
                                    f'(notify-keyspace-events "{self.server_config()}")')
        else:
            self.assertEqual(first, "watching lock:life, lock:other by polling every 250ms "
                                    "(keyspace notifications are off on this server)")
        self.assertRegex(lines.next(), r"^\d{4}-\d\d-\d\dT[\d:.]+Z  lock:life  free$")
        self.assertRegex(lines.next(), r"  lock:other  free$")
        token = self.run_rlock(["acquire", "--ttl", "30s", KEY]).stdout.strip()
        taken = lines.next()
        self.assertRegex(taken, r"  lock:life  taken by \S+ pid \d+ \(\w+\), fence \d+; "
                                r"free in [\d.]+s unless renewed$")
        self.run_rlock(["release", KEY, "--token", token])
        released = lines.next()
        self.assertIn("  lock:life  released by ", released)
        if self.MODE == "polling":
            self.assertIn("(judged by the ttl it had left)", released)
        self.interrupt(lines)

    def server_config(self):
        return self.server.cmd("CONFIG", "GET", "notify-keyspace-events")[1]

    def test_scripted_lock_life(self):
        lines = self.watch(KEY)
        start = lines.next()
        self.assertEqual(start["event"], "watching")
        self.assertEqual(start["mode"], self.MODE)
        self.assertEqual(start["keys"], [KEY])
        state = lines.next()
        self.assertEqual((state["event"], state["state"], state["key"]), ("state", "free", KEY))

        # acquire, extend, release by token
        r = self.run_rlock(["acquire", "--ttl", "30s", "--json", KEY])
        acquired = json.loads(r.stdout)
        taken = lines.event("taken")[-1]
        self.assertEqual((taken["token"], taken["fence"]), (acquired["token"], acquired["fence"]))
        self.assertEqual(taken["holder"]["pid"], os.getpid())
        self.assertGreater(taken["ttl_ms"], 25000)
        self.assertEqual(taken["state"], "held")
        self.assertEqual(self.run_rlock(["extend", KEY, "--token", acquired["token"],
                                         "--ttl", "30s"]).returncode, 0)
        self.run_rlock(["release", KEY, "--token", acquired["token"]])
        released = lines.event("released")
        self.assertEqual([e["event"] for e in released], ["released"])  # an extend is no news
        self.assertEqual(released[-1]["token"], acquired["token"])
        self.assertEqual(released[-1]["state"], "free")
        self.assertEqual(released[-1]["evidence"],
                         "notification" if self.MODE == "notifications" else "ttl")
        self.assertGreaterEqual(released[-1]["held_ms"], 0)

        # a lock left to expire: its renewal is overdue at half its ttl, then it expires
        self.run_rlock(["acquire", "--ttl", "1s", KEY])
        self.assertEqual(lines.event("taken")[-1]["lease_ms"] > 500, True)
        expiry = lines.event("expired", timeout=10)
        # "overdue" at half the ttl, unless this host was too slow to look by then
        self.assertEqual([e["event"] for e in expiry if e["event"] != "overdue"], ["expired"])
        self.assertEqual(expiry[-1]["evidence"],
                         "notification" if self.MODE == "notifications" else "ttl")

        # a waiter queued behind a holder whose lock is broken by force, then served
        holder = self.start(["run", "--ttl", "3s", KEY, "--", "sleep", "30"])
        self.assertEqual(lines.event("taken")[-1]["holder"]["command"], "sleep")
        waiter = self.start(["run", "--wait", "10s", "--fair", KEY, "--", "true"])
        queued = lines.event("queued")[-1]
        self.assertEqual((queued["waiters"], queued["was_waiters"]), (1, 0))
        self.assertEqual(len(queued["next_waiter"]), 32)
        r = self.run_rlock(["release", "--force", KEY])
        self.assertEqual(r.returncode, 0, r.stderr)
        broken = lines.event("broken")[-1]
        self.assertIn("@", broken["broken"]["by"])
        self.assertEqual(broken["holder"]["command"], "sleep")
        self.assertEqual(holder.wait(timeout=10), 76)  # it noticed, and stopped its command
        self.assertEqual(waiter.wait(timeout=10), 0)
        rest = lines.until(lambda e: e["event"] == "released" and e["holder"]["command"] == "true",
                           what="the waiter's release")
        kinds = [e["event"] for e in rest]
        self.assertEqual([k for k in kinds if k != "dequeued"], ["released", "taken", "released"])
        self.assertIn("dequeued", kinds + [e["event"] for e in self.more(lines)])
        self.assertTrue(rest[0]["broken"], rest[0])  # the tombstone's end: its holder stopped
        self.assertEqual(rest[0]["evidence"],
                         "notification" if self.MODE == "notifications" else "ttl")
        self.interrupt(lines, signal.SIGTERM)

    def more(self, lines):
        """The events printed within half a second (one that may come in the next look)."""
        out = []
        try:
            while True:
                out.append(lines.next(0.5))
        except AssertionError:
            return out

    def test_short_runs_are_all_told(self):
        # A run of `true` takes the lock and gives it back within milliseconds, mostly between
        # two polls: its history entry tells of it then.
        lines = self.watch(KEY)
        lines.next()
        lines.next()
        fences = set()
        for _ in range(5):
            r = self.run_rlock(["run", KEY, "--", "true"])
            self.assertEqual(r.returncode, 0, r.stderr)
            events = lines.event("released", timeout=5)
            self.assertEqual([e["event"] for e in events], ["taken", "released"])
            self.assertEqual(events[0]["fence"], events[1]["fence"])
            self.assertEqual(events[1]["holder"]["command"], "true")
            fences.add(events[1]["fence"])
        self.assertEqual(len(fences), 5)
        self.interrupt(lines)

    def quick_runs(self, n):
        """N runs of `true`, one after another from one shell (a few ms each, mostly between
        two polls); returns the fences of the runs the history recorded, oldest first."""
        r = subprocess.run(["sh", "-c", f'for i in $(seq {n}); do "$0" run "$1" -- true || exit; done',
                            RLOCK, KEY], env=rlock_env(self.server), capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        history = json.loads(self.run_rlock(["history", "--json", "-n", str(n + 5), KEY]).stdout)
        fences = [run["fence"] for run in reversed(history["runs"])]
        self.assertEqual(len(fences), n)
        return fences

    def assert_told_once_in_order(self, lines, fences):
        """The watch tells each run of FENCES taken, then released, in their order, once."""
        told = lines.until(lambda e: e["event"] == "released" and e["fence"] == fences[-1],
                           timeout=15, what="the last run's release")
        told += self.more(lines)  # a run told twice would come in the next look
        events = [(e["event"], e["fence"]) for e in told]
        self.assertEqual(events, [(kind, f) for f in fences for kind in ("taken", "released")])
        for e in told:
            self.assertEqual((e["holder"]["command"], e["held_ms"] is not None),
                             ("true", e["event"] == "released"), e)

    def test_every_quick_run_is_told_once_in_order(self):
        # Polling every 250 ms saw few of them, and told only the newest run of each look.
        lines = self.watch(KEY)
        lines.next()
        lines.next()
        self.assert_told_once_in_order(lines, self.quick_runs(12))
        self.interrupt(lines)

    def test_runs_while_the_watch_is_held_up_are_all_told(self):
        # A watch that cannot look for a while (a loaded host; here SIGSTOP) finds ten runs in
        # the history at its next look, with keyspace notifications too.
        lines = self.watch(KEY)
        lines.next()
        lines.next()
        lines.proc.send_signal(signal.SIGSTOP)
        try:
            fences = self.quick_runs(10)
        finally:
            lines.proc.send_signal(signal.SIGCONT)
        self.assert_told_once_in_order(lines, fences)
        self.interrupt(lines)

    def test_a_retried_run_it_did_not_see_is_told_once_as_its_last_attempt_ended(self):
        # Its three attempts are three history entries of one fence: one run, which succeeded.
        lines = self.watch(KEY)
        lines.next()
        lines.next()
        count = self.path("count")
        lines.proc.send_signal(signal.SIGSTOP)
        try:
            r = self.run_rlock(["run", "--retry", "2", "--retry-delay", "0", KEY, "--", "sh", "-c",
                                f"echo x >> {count}; [ $(wc -l < {count}) -gt 2 ]"])
        finally:
            lines.proc.send_signal(signal.SIGCONT)
        self.assertEqual(r.returncode, 0, r.stderr)
        told = lines.until(lambda e: e["event"] == "released", timeout=15, what="the release")
        told += self.more(lines)
        self.assertEqual([e["event"] for e in told], ["taken", "released"])
        self.assertEqual((told[-1]["run"]["attempt"], told[-1]["run"]["exit_status"]), (3, 0))
        self.assertGreaterEqual(told[-1]["held_ms"], told[-1]["run"]["attempt_held_ms"])
        self.interrupt(lines)

    def test_a_release_says_how_the_run_ended(self):
        lines = self.watch(KEY, json_lines=False)
        lines.next()
        lines.next()
        for job, status in (["sh", "-c", "exit 3"], 3), (["true"], 0):
            self.assertEqual(self.run_rlock(["run", KEY, "--"] + job).returncode, status)
            released = lines.until(lambda line: " released by " in line, 5, "released")[-1]
            self.assertIn(f": exit {status}", released)
        self.interrupt(lines)

    def test_a_pause_and_its_end_are_told(self):
        lines = self.watch(KEY)
        lines.event("state")
        self.assertEqual(self.run_rlock(["pause", KEY, "--for", "10m", "--reason", "db"]).returncode, 0)
        paused = lines.event("paused")[-1]
        self.assertEqual((paused["pause"]["reason"], paused["state"]), ("db", "free"))
        self.assertEqual(self.run_rlock(["resume", KEY]).returncode, 0)
        resumed = lines.event("resumed")[-1]
        self.assertIsNone(resumed["pause"])
        self.assertIsNone(resumed["evidence"])
        # One that ends by itself: its time was up.
        self.assertEqual(self.run_rlock(["pause", KEY, "--for", "1s"]).returncode, 0)
        lines.event("paused")
        self.assertEqual(lines.event("resumed")[-1]["evidence"], "ttl")
        self.interrupt(lines)

    def test_once_per_waiters_that_find_the_period_done_are_no_runs(self):
        # Hosts that wait (--wait) behind the period's run are woken as it ends, find the period
        # done and exit 75 without taking the lock: the watch tells one run, not one per host.
        lines = self.watch(KEY)
        lines.event("state")
        once = ["--once-per", "day", "--record-skips"]
        holder = self.start(["run", *once, KEY, "--", "cat"],
                            stdin=subprocess.PIPE)
        lines.event("taken")
        waiters = [self.start(["run", *once, "--wait", "30s", KEY, "--", "true"],
                              env=rlock_env(self.server, RLOCK_HOSTNAME=f"web-{i}"))
                   for i in range(3)]
        wait_until(lambda: self.server.cmd("ZCARD", "{lock:life}:rlock:queue") == 3, 10,
                   "three waiters")
        fence = self.server.cmd("GET", "{lock:life}:rlock:fence")
        holder.stdin.close()
        self.assertEqual(holder.wait(timeout=10), 0)
        for w in waiters:
            self.assertEqual(w.wait(timeout=10), 75)
            self.assertIn("already run this period", w.stderr.read())
        # None of them took the lock: no fence was drawn, and the next taken is the next run's.
        self.assertEqual(self.server.cmd("GET", "{lock:life}:rlock:fence"), fence)
        token = self.run_rlock(["acquire", KEY]).stdout.strip()
        events = lines.event("taken")
        self.assertEqual([e["event"] for e in events if e["event"] in ("taken", "released")],
                         ["released", "taken"], events)
        self.run_rlock(["release", KEY, "--token", token])
        self.interrupt(lines)

    def test_a_reader_that_goes_away_ends_it_quietly(self):
        # `rlock watch k | head -1`: the next line finds no reader (EPIPE): exit 0, no error.
        p = self.start(["watch", KEY], stdout=subprocess.PIPE)
        self.assertTrue(p.stdout.readline().startswith("watching "))
        p.stdout.close()
        self.assertEqual(self.run_rlock(["run", KEY, "--", "true"]).returncode, 0)
        self.assertEqual(p.wait(timeout=10), 0)
        self.assertEqual(p.stderr.read(), "")

    def test_a_late_renewal(self):
        lines = self.watch(KEY)
        lines.next()
        lines.next()
        token = self.run_rlock(["acquire", "--ttl", "4s", KEY]).stdout.strip()
        lines.event("taken")
        overdue = lines.event("overdue")[-1]
        self.assertLess(overdue["ttl_ms"], 2000)
        self.assertEqual(self.run_rlock(["extend", KEY, "--token", token, "--ttl", "4s"])
                         .returncode, 0)
        late = lines.event("renewed_late")[-1]
        self.assertLess(late["left_ms"], 2000)
        self.assertGreater(late["lease_ms"], 3000)
        self.assertEqual(late["token"], token)
        # Renewed on time from now on: nothing to say.
        self.assertEqual(self.run_rlock(["extend", KEY, "--token", token, "--ttl", "4s"])
                         .returncode, 0)
        self.run_rlock(["release", KEY, "--token", token])
        self.assertEqual([e["event"] for e in lines.event("released")], ["released"])
        self.interrupt(lines)

    def frozen_holder(self, ttl):
        """A run whose rlock is stopped (SIGSTOP) once it holds KEY: it renews no more."""
        holder = self.start(["run", "--ttl", ttl, KEY, "--", "sleep", "60"])
        wait_until(lambda: self.server.cmd("GET", KEY), 10, "the lock taken")
        holder.send_signal(signal.SIGSTOP)
        self.addCleanup(lambda: (holder.send_signal(signal.SIGCONT), holder.wait(timeout=20)))
        return holder

    def test_a_frozen_holder_is_overdue_of_its_real_ttl(self):
        # The ttl is the one the holder renews with, as its value says: not the time left that
        # a look (up to a poll late) saw after it took the lock.
        lines = self.watch(KEY, json_lines=False)
        lines.next()
        lines.next()
        self.frozen_holder("3s")
        overdue = lines.until(lambda l: "overdue" in l, 10, "overdue")[-1]
        self.assertIn("of its 3s ttl left (rlock renews with 2s left)", overdue)
        self.interrupt(lines)

    def test_a_holder_first_seen_mid_lease_is_told_overdue(self):
        self.frozen_holder("3s")
        lines = self.watch(KEY)
        lines.next()
        self.assertEqual(lines.next()["event"], "state")
        overdue = lines.event("overdue")[-1]
        self.assertEqual(overdue["lease_ms"], 3000)
        self.interrupt(lines)

    def test_a_lock_kept_for_min_hold_expires_without_an_alarm(self):
        lines = self.watch(KEY)
        lines.next()
        lines.next()
        self.assertEqual(self.run_rlock(["run", "--min-hold", "2s", "--ttl", "2s", KEY, "--",
                                         "true"]).returncode, 0)
        events = lines.event("expired", timeout=10)
        self.assertEqual([e["event"] for e in events], ["taken", "expired"])  # no "overdue"
        self.assertEqual(events[-1]["holder"]["command"], "true")
        self.interrupt(lines)

    def test_a_broken_lock_is_told_as_broken_by_whom(self):
        self.server.cmd("SET", KEY, "another-program", "PX", "60000")
        self.assertEqual(self.run_rlock(["release", "--force", KEY]).returncode, 0)
        lines = self.watch(KEY, json_lines=False)
        lines.next()
        self.assertRegex(lines.next(), r"  lock:life  broken: another client's lock was broken "
                                       r"by \S+@\S+ \d+m?s ago; free once it has stopped, in "
                                       r"[\d.]+s at the latest$")
        self.interrupt(lines)

    def test_json_fields_are_all_there(self):
        lines = self.watch(KEY)
        lines.next()
        state = lines.next()
        self.assertIn("lock", state)
        self.run_rlock(["acquire", "--ttl", "30s", KEY])
        taken = lines.event("taken")[-1]
        for field in ("event", "time", "key", "state", "type", "holder", "token", "fence",
                      "acquired_at", "held_ms", "broken", "value", "ttl_ms", "lease_ms",
                      "left_ms", "evidence", "shared", "waiters", "was_waiters", "next_waiter"):
            self.assertIn(field, taken)
        self.assertRegex(taken["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(set(taken["holder"]), {"host", "pid", "user", "command"})
        self.assertTrue(taken["value"].startswith("rlock/1 "))
        self.interrupt(lines)

    def test_writes_nothing_to_redis(self):
        self.assertEqual(self.server.cmd("DBSIZE"), 0)
        lines = self.watch(KEY, "lock:{tagged}:x")
        lines.next()
        lines.next()
        lines.next()
        # A change the watch reads the locks for, made and undone by the test itself.
        self.server.cmd("SET", KEY, "another-program", "PX", "60000")
        lines.event("taken")
        self.server.cmd("DEL", KEY)
        lines.event("released")
        self.interrupt(lines)
        self.assertEqual(self.server.cmd("KEYS", "*"), [])
        self.assertEqual(self.server.cmd("DBSIZE"), 0)

    def test_semaphore_places(self):
        lines = self.watch(KEY)
        lines.next()
        lines.next()
        first = self.start(["run", "--limit", "2", KEY, "--", "sleep", "30"])
        taken = lines.event("place_taken")[-1]
        self.assertEqual((taken["state"], taken["shared"]), ("semaphore", False))
        os.killpg(first.pid, signal.SIGTERM)
        first.wait(timeout=10)
        freed = lines.event("place_released")[-1]
        self.assertEqual(freed["state"], "free")
        self.interrupt(lines)

    def test_redis_restart_is_one_line_and_the_watch_goes_on(self):
        lines = self.watch(KEY)
        lines.next()
        lines.next()
        self.server.kill()
        self.assertEqual(lines.event("unreachable")[-1]["event"], "unreachable")
        self.server.start(port=self.server.port)
        self.server.cmd("CONFIG", "SET", "notify-keyspace-events", self.NOTIFY)
        self.server.cmd("SET", KEY, "another-program", "PX", "60000")
        events = lines.event("taken")
        kinds = [e["event"] for e in events]
        self.assertEqual(kinds[0], "reachable")
        self.assertNotIn("unreachable", kinds)  # one line for the whole outage
        self.assertEqual(events[-1]["state"], "foreign")
        self.interrupt(lines)

    def test_a_lock_gone_in_a_restart_is_not_called_released(self):
        # Redis restarted without its data: the holder did not give it back, and may still run.
        lines = self.watch(KEY)
        lines.next()
        lines.next()
        r = self.run_rlock(["acquire", "--ttl", "60s", KEY])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines.event("taken")
        self.server.kill()
        lines.event("unreachable")
        self.server.start(port=self.server.port)
        self.server.cmd("CONFIG", "SET", "notify-keyspace-events", self.NOTIFY)
        gone = lines.event("expired")[-1]
        self.assertEqual(gone["evidence"], "outage")
        self.interrupt(lines)


class WatchWithNotifications(WatchMixin, RedisTestCase):
    NOTIFY = "KEA"
    MODE = "notifications"
    # A watcher that may read the server's settings and subscribe (docs/REDIS.md "Least privilege":
    # the job's lines do not give CONFIG GET, which reads requirepass too).
    extra_acl = (["+config|get", "+subscribe", "&__keyspace@*__:*"],)

    def test_without_the_classes_it_needs_it_polls_and_says_why(self):
        self.server.cmd("CONFIG", "SET", "notify-keyspace-events", "Ex")
        lines = self.watch(KEY, json_lines=False)
        self.assertEqual(lines.next(), 'watching lock:life by polling every 250ms '
                                       '(notify-keyspace-events "xE" lacks Kg$z)')
        self.interrupt(lines)
        self.assertEqual(self.server_config(), "xE")  # never changed

    def test_config_get_refused_by_acl_polls(self):
        self.server.cmd("ACL", "SETUSER", "watcher", "on", ">pw", "~*", "&*", "+@all",
                        "-config")
        env = rlock_env(RLOCK_REDIS_URL=f"redis://watcher:pw@127.0.0.1:{self.server.port}")
        proc = start_rlock(["watch", KEY], env=env)
        self.procs.append(proc)
        lines = Lines(proc)
        self.assertEqual(lines.next(), "watching lock:life by polling every 250ms "
                                       "(CONFIG GET is not allowed: NOPERM)")
        self.interrupt(lines)


    def proxied_watch(self, proxy):
        proc = start_rlock(["watch", "--json", KEY], env=rlock_env(RLOCK_REDIS_URL=proxy.url))
        self.procs.append(proc)
        lines = JsonLines(proc)
        self.assertEqual(lines.next()["mode"], "notifications")
        self.assertEqual(lines.next()["event"], "state")
        return lines

    def assert_no_outage(self, lines):
        seen = [json.loads(line) for line in lines.seen]
        outages = [e for e in seen + self.more(lines) if e["event"] in ("unreachable", "reachable")]
        self.assertEqual(outages, [])
        self.interrupt(lines)

    def test_a_proxy_that_closes_idle_connections_is_no_outage(self):
        # HAProxy in TCP mode with `timeout client 1s` closes the subscription a second after
        # its last message, and the reader's connection between its reads: each is replaced at
        # once, without a word (watch said "Redis unreachable ... / Redis answers again after
        # 36ms" every second), and what changes is told all the same.
        proxy = IdleClosingProxy(self.server.port, idle=1.0)
        self.addCleanup(proxy.close)
        lines = self.proxied_watch(proxy)
        wait_until(lambda: proxy.closed >= 3, 10, "the proxy to close idle connections")
        self.server.cmd("SET", KEY, "another-program", "PX", "60000")
        self.assertEqual(lines.event("taken")[-1]["state"], "foreign")
        wait_until(lambda: proxy.closed >= 5, 10, "the proxy to close idle connections again")
        self.server.cmd("DEL", KEY)
        lines.event("released")
        self.assert_no_outage(lines)

    def test_a_proxy_close_that_crosses_a_command_is_no_outage(self):
        # The worst case of a close at the proxy's idle timeout: rlock learns of it only once
        # it has sent (the subscription's next message, the read it makes then). Both
        # connections are replaced at once; the read, safe to repeat, is made again.
        proxy = IdleClosingProxy(self.server.port, idle=1.0, lazy=True)
        self.addCleanup(proxy.close)
        lines = self.proxied_watch(proxy)
        for change, event in ((("SET", KEY, "another-program", "PX", "60000"), "taken"),
                              (("DEL", KEY), "released")):
            closed = proxy.closed
            wait_until(lambda: proxy.idle_for(1.1), 10, "every connection to be idle")
            self.server.cmd(*change)
            lines.event(event)
            self.assertGreaterEqual(proxy.closed, closed + 2)  # the subscription and the reader
        self.assert_no_outage(lines)


    @unittest.skipUnless(shutil.which("haproxy"), "HAProxy is not installed")
    def test_behind_haproxy_with_idle_timeouts(self):
        # The real thing: HAProxy in TCP mode, `timeout client 1s`, `timeout server 1s`.
        port = free_port()
        conf = os.path.join(self.tmp, "haproxy.cfg")
        with open(conf, "w") as f:
            f.write("defaults\n  mode tcp\n  timeout connect 1s\n  timeout client 1s\n"
                    f"  timeout server 1s\nlisten redis\n  bind 127.0.0.1:{port}\n"
                    f"  server r 127.0.0.1:{self.server.port}\n")
        haproxy = subprocess.Popen(["haproxy", "-f", conf], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (haproxy.kill(), haproxy.wait()))
        wait_until(lambda: self.connects(port), 10, "haproxy to listen")
        proxy = type("HAProxy", (), {"url": f"redis://127.0.0.1:{port}"})
        lines = self.proxied_watch(proxy)
        # Each connection it closes, rlock replaces: a new client of the server.
        looker = self.server.client()
        self.addCleanup(looker.close)
        seen = set()

        def clients_seen():
            seen.update(line.split()[0] for line in looker("CLIENT", "LIST").splitlines())
            return len(seen)
        at_start = clients_seen()
        wait_until(lambda: clients_seen() >= at_start + 4, 10, "haproxy to close connections")
        self.server.cmd("SET", KEY, "another-program", "PX", "60000")
        self.assertEqual(lines.event("taken")[-1]["state"], "foreign")
        self.assert_no_outage(lines)

    @staticmethod
    def connects(port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False


class WatchByPolling(WatchMixin, RedisTestCase):
    NOTIFY = ""
    MODE = "polling"
    extra_acl = (["+config|get", "+subscribe", "&__keyspace@*__:*"],)

    def test_the_documented_acl_alone_polls_and_says_why(self):
        self.server.cmd("CONFIG", "SET", "notify-keyspace-events", "KEA")
        self.addCleanup(self.server.cmd, "CONFIG", "SET", "notify-keyspace-events", "")
        self.server.cmd("ACL", "SETUSER", "default", "-config|get")
        self.addCleanup(self.server.cmd, "ACL", "SETUSER", "default", "+config|get")
        lines = self.watch(KEY, json_lines=False)
        self.assertEqual(lines.next(), "watching lock:life by polling every 250ms "
                                       "(CONFIG GET is not allowed: NOPERM)")
        self.interrupt(lines)


class WatchTopologies(unittest.TestCase):
    """A Cluster's keys are watched on the master of each one's slot; Redlock is polled."""

    def setUp(self):
        self.servers, self.procs = [], []

    def tearDown(self):
        stop_procs(self.procs)
        for s in self.servers:
            s.stop()

    def watch(self, args, env):
        proc = start_rlock(["watch", "--json"] + args, env=env)
        self.procs.append(proc)
        return JsonLines(proc)

    def test_cluster_keys_on_three_masters(self):
        self.servers = start_cluster("--notify-keyspace-events", "KEA")
        keys = key_per_master(self.servers)
        env = rlock_env(RLOCK_REDIS_URL=self.servers[0].url)
        lines = self.watch(sorted(keys.values()), env)
        start = lines.next()
        self.assertEqual((start["mode"], start["notify_keyspace_events"]), ("notifications", "AKE"))
        for key in sorted(keys.values()):
            self.assertEqual(lines.next()["key"], key)
        for key in sorted(keys.values()):
            token = run_rlock(["acquire", "--ttl", "30s", key], env=env).stdout.strip()
            taken = lines.event("taken")[-1]
            self.assertEqual((taken["key"], taken["token"]), (key, token))
            run_rlock(["release", key, "--token", token], env=env)
            released = lines.event("released")[-1]
            self.assertEqual((released["key"], released["evidence"]), (key, "notification"))

    def test_sentinel_primary(self):
        primary = RedisServer("--notify-keyspace-events", "KEA")
        self.servers = [primary]
        tmp = tempfile.mkdtemp(prefix="rlock-watch-sentinel-")
        self.addCleanup(shutil.rmtree, tmp, True)
        port = free_port()
        conf = os.path.join(tmp, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"port {port}\nbind 127.0.0.1\ndir {tmp}\n"
                    f"sentinel monitor mymaster 127.0.0.1 {primary.port} 1\n")
        sentinel = subprocess.Popen([REDIS_SENTINEL or "redis-sentinel", conf],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(sentinel.wait)
        self.addCleanup(sentinel.kill)

        def knows_primary():
            try:
                c = RedisClient(port)
                try:
                    return c("SENTINEL", "get-master-addr-by-name", "mymaster")
                finally:
                    c.close()
            except OSError:
                return None
        wait_until(knows_primary, 20, "the sentinel to know the primary")
        env = rlock_env(RLOCK_REDIS_URL=f"redis-sentinel://127.0.0.1:{port}/mymaster")
        lines = self.watch([KEY], env)
        self.assertEqual(lines.next()["mode"], "notifications")
        lines.next()
        # No replica here: --min-replicas defaults to 1 behind Sentinel.
        r = run_rlock(["acquire", "--min-replicas", "0", "--ttl", "30s", KEY], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(lines.event("taken")[-1]["token"], r.stdout.strip())
        run_rlock(["release", KEY, "--token", r.stdout.strip()], env=env)
        self.assertEqual(lines.event("released")[-1]["evidence"], "notification")

    def test_config_renamed_polls(self):
        server = RedisServer("--rename-command", "CONFIG", "")
        self.servers = [server]
        lines = Lines(start_rlock(["watch", KEY], env=rlock_env(server)))
        self.procs.append(lines.proc)
        self.assertEqual(lines.next(), "watching lock:life by polling every 250ms "
                                       "(CONFIG is renamed or disabled on this server)")

    def test_redlock_is_polled(self):
        self.servers = [RedisServer("--notify-keyspace-events", "KEA") for _ in range(3)]
        urls = [a for s in self.servers for a in ("--redis", s.url)]
        env = rlock_env()
        lines = self.watch(urls + [KEY], env)
        start = lines.next()
        self.assertEqual((start["mode"], start["reason"]),
                         ("polling", "Redlock: each of its 3 servers would tell of its own copy "
                                     "only"))
        lines.next()
        token = run_rlock(["acquire", "--ttl", "30s"] + urls + [KEY], env=env).stdout.strip()
        self.assertEqual(lines.event("taken")[-1]["token"], token)


class WatchBadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = RedisServer()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_usage_errors_are_64_and_touch_nothing(self):
        env = rlock_env(self.server)
        before = self.server.cmd("INFO", "commandstats")
        for args, says in ((["watch", "k", "k"], "KEY 'k' is given twice"),
                           (["watch"], "KEY is required"),
                           (["watch", "--no-such-flag", "k"], "unknown option '--no-such-flag'"),
                           (["watch", "--ttl", "5s", "k"], "rlock watch takes no --ttl")):
            r = run_rlock(args, env=env)
            self.assertEqual((r.returncode, r.stdout), (64, ""), args)
            self.assertIn(says, r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        # No command reached the server (INFO itself is counted, and only it).
        after = self.server.cmd("INFO", "commandstats")
        strip = lambda text: [l for l in text.splitlines() if not l.startswith("cmdstat_info")]
        self.assertEqual(strip(before), strip(after))

    def test_unreachable_at_start_is_69(self):
        down = rlock_env(RLOCK_REDIS_URL=f"redis://127.0.0.1:{free_port()}")
        r = run_rlock(["watch", "k"], env=down)
        self.assertEqual((r.returncode, r.stdout), (69, ""))
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("cannot connect", r.stderr)

    def test_options_before_the_verb_and_the_prefix(self):
        env = rlock_env()  # only the flag names Redis
        proc = start_rlock(["--redis", self.server.url, "--prefix", "p:", "watch", "--json", "k"],
                           env=env)
        try:
            lines = JsonLines(proc)
            self.assertEqual(lines.next()["keys"], ["p:k"])
            self.assertEqual(lines.next()["key"], "p:k")
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=10), 0)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()


if __name__ == "__main__":
    unittest.main()
