"""A good tenant of a shared Redis: every key rlock makes besides the lock itself expires
(--retention), fences stay increasing when their counter is gone, and `list` finds locks
without reading unrelated keys."""
import array
import fcntl
import json
import os
import re
import signal
import subprocess
import termios
import time
import unittest

from harness import RLOCK, RedisClient, RedisTestCase, rlock_env, wait_until


def fill(server, prefix, count, value="x" * 20):
    """COUNT unrelated string keys, without expiry, set in batches over one connection."""
    client = RedisClient(port=server.port, timeout=30)
    try:
        for start in range(0, count, 1000):
            args = []
            for i in range(start, min(count, start + 1000)):
                args += [f"{prefix}{i}", value]
            client("MSET", *args)
    finally:
        client.close()


class Retention(RedisTestCase):
    def keys_without_expiry(self, but=()):
        return sorted(k for k in self.server.cmd("KEYS", "*")
                      if k not in but and self.server.cmd("PTTL", k) < 0)

    def test_every_helper_key_expires(self):
        # A plain run, a wait, a semaphore, a period, an acquire, a reset: every key they
        # leave behind expires; only a held lock's own key is the holder's business.
        started = self.path("started")
        holder = self.start(["run", "k", "--", "sh", "-c", f"touch {started}; sleep 1"])
        wait_until(lambda: os.path.exists(started), 10, "the holder")
        waiter = self.run_rlock(["run", "--wait", "20s", "--fair", "k", "--", "true"])
        self.assertEqual(waiter.returncode, 0, waiter.stderr)
        self.assertEqual(holder.wait(timeout=20), 0)
        for args in (["run", "--limit", "3", "sem", "--", "true"],
                     ["run", "--once-per", "day", "--record-skips", "daily", "--", "true"],
                     ["run", "--once-per", "day", "--record-skips", "daily", "--", "true"],
                     ["reset-period", "daily", "--once-per", "day"],
                     ["acquire", "--ttl", "30s", "acq"]):
            r = self.run_rlock(args)
            self.assertIn(r.returncode, (0, 75), (args, r.stderr))
        keys = self.server.cmd("KEYS", "*")
        for helper in ("{k}:rlock:fence", "{k}:rlock:history", "{k}:rlock:ended",
                       "{k}:rlock:last-success",
                       "{sem}:rlock:fence", "{sem}:rlock:ended", "{daily}:rlock:history",
                       "{acq}:rlock:fence"):
            self.assertIn(helper, keys)
        self.assertEqual(self.keys_without_expiry(), [])
        # The default keeps them 30 days after the last use.
        pttl = self.server.cmd("PTTL", "{k}:rlock:fence")
        self.assertTrue(29 * 86400_000 < pttl <= 30 * 86400_000, pttl)
        # inf keeps today's behaviour: no expiry on the counter and the history.
        r = self.run_rlock(["run", "--retention", "inf", "k", "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.keys_without_expiry(),
                         ["{k}:rlock:fence", "{k}:rlock:history", "{k}:rlock:last-success"])

    def test_the_ends_of_runs_past_keeping_go_with_every_release(self):
        # The ends kept for a release sent again live a minute each, but their key's expiry
        # moves on with every release: a lock in steady use must drop them as it goes, or its
        # ends would grow for as long as it is used. An end a minute old is put there by hand.
        now_ms = int(self.server.cmd("TIME")[0]) * 1000
        for args in (["run", "--history-length", "0", "plain", "--", "true"],
                     ["run", "plain", "--", "true"],
                     ["run", "--shared", "--history-length", "0", "shared", "--", "true"],
                     ["run", "--limit", "2", "--history-length", "0", "sem", "--", "true"]):
            with self.subTest(args=args):
                ends = "{%s}:rlock:ended" % args[-3]
                self.server.cmd("ZADD", ends, now_ms - 1000, "release 00000000000000000000000000000000")
                r = self.run_rlock(args)
                self.assertEqual(r.returncode, 0, r.stderr)
                members = self.server.cmd("ZRANGE", ends, 0, -1)
                self.assertNotIn("release 00000000000000000000000000000000", members)
                self.assertTrue(members)  # this run's end is there

    def test_a_lock_unused_past_its_retention_leaves_nothing(self):
        for key in ("a", "job:{7}"):
            r = self.run_rlock(["run", "--retention", "1s", key, "--", "true"])
            self.assertEqual(r.returncode, 0, r.stderr)
        # A fence, a history and its last success each, and the ends of the runs a re-sent end
        # would find.
        self.assertEqual(sorted(self.server.cmd("KEYS", "*")),
                         ["job:{7}:rlock{}:ended", "job:{7}:rlock{}:fence",
                          "job:{7}:rlock{}:history", "job:{7}:rlock{}:last-success",
                          "{a}:rlock:ended", "{a}:rlock:fence", "{a}:rlock:history",
                          "{a}:rlock:last-success"])
        # The ends go a minute after the runs, whatever the retention: too long to wait here.
        for key in ("job:{7}:rlock{}:ended", "{a}:rlock:ended"):
            self.assertTrue(0 < self.server.cmd("PTTL", key) <= 60000)
        wait_until(lambda: self.server.cmd("DBSIZE") == 2, 15, "every other key to expire")

    def test_inspect_says_how_long_they_are_kept(self):
        r = self.run_rlock(["run", "--retention", "2d", "k", "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        text = self.run_rlock(["inspect", "k"]).stdout
        self.assertRegex(text, r"\nkept +fence counter 1d23h\S* more, history 1d23h\S* more\n")
        doc = json.loads(self.run_rlock(["inspect", "--json", "k"]).stdout)
        self.assertTrue(0 < doc["fence_counter_ttl_ms"] <= 2 * 86400_000)
        self.assertTrue(0 < doc["history_ttl_ms"] <= 2 * 86400_000)
        self.run_rlock(["run", "--retention", "inf", "k", "--", "true"])
        self.assertIn("fence counter for ever, history for ever",
                      self.run_rlock(["inspect", "k"]).stdout)
        doc = json.loads(self.run_rlock(["inspect", "--json", "k"]).stdout)
        self.assertIsNone(doc["fence_counter_ttl_ms"])

    def test_bad_retention_is_refused(self):
        for bad in ("0s", "-1d", "forever", ""):
            r = self.run_rlock(["run", "--retention", bad, "k", "--", "true"])
            self.assertEqual(r.returncode, 64, (bad, r.stderr))
            self.assertIn("--retention", r.stderr)
        self.assertEqual(self.server.cmd("DBSIZE"), 0)


class Fences(RedisTestCase):
    def fence_of_a_run(self, key="k"):
        r = self.run_rlock(["run", key, "--", "sh", "-c", "echo $RLOCK_FENCE"])
        self.assertEqual(r.returncode, 0, r.stderr)
        return int(r.stdout)

    def test_fences_increase_across_flushall_expiry_and_a_restart_without_data(self):
        fences = [self.fence_of_a_run(), self.fence_of_a_run()]
        self.server.cmd("FLUSHALL")
        fences.append(self.fence_of_a_run())
        self.server.cmd("DEL", "{k}:rlock:fence")  # as an expiry would
        fences.append(self.fence_of_a_run())
        self.server.restart()  # no persistence: every key is gone
        self.assertEqual(self.server.cmd("DBSIZE"), 0)
        fences.append(self.fence_of_a_run())
        self.assertEqual(fences, sorted(set(fences)), "each fence above every earlier one")
        # A semaphore's fences come from the same counter, the same way.
        self.server.cmd("FLUSHALL")
        r = self.run_rlock(["run", "--limit", "2", "k", "--", "sh", "-c", "echo $RLOCK_FENCE"])
        self.assertGreater(int(r.stdout), fences[-1])

    def test_an_old_counter_goes_on_from_the_clock(self):
        # A counter from an rlock before clock-based fences: the next fence is above it and
        # above the clock.
        self.server.cmd("SET", "{k}:rlock:fence", "41")
        before = self.server.time_us()
        fence = self.fence_of_a_run()
        self.assertGreaterEqual(fence, before)
        # A counter ahead of the clock (say, copied from a server whose clock was ahead) goes
        # on by one.
        ahead = before + 10**12
        self.server.cmd("SET", "{k}:rlock:fence", str(ahead))
        self.assertEqual(self.fence_of_a_run(), ahead + 1)
        value_fence = self.server.cmd("GET", "{k}:rlock:fence")
        self.assertEqual(value_fence, str(ahead + 1))  # whole digits, as the counter keeps it

    def test_fences_are_exact_in_json(self):
        r = self.run_rlock(["acquire", "--json", "k"])
        doc = json.loads(r.stdout)
        self.assertEqual(str(doc["fence"]), self.server.cmd("GET", "{k}:rlock:fence"))
        self.assertLess(doc["fence"], 2**53)


class List(RedisTestCase):
    def listed(self, *args):
        """The keys `rlock list ARGS` shows, in its order."""
        r = self.run_rlock(["list", *args])
        self.assertEqual(r.returncode, 0, r.stderr)
        return [line.split()[0] for line in r.stdout.splitlines()]

    def gets(self):
        stats = self.server.cmd("INFO", "commandstats")
        for line in stats.splitlines():
            if line.startswith("cmdstat_get:"):
                return int(line.split("calls=")[1].split(",")[0])
        return 0

    def test_list_reads_no_unrelated_key(self):
        fill(self.server, "unrelated:", 200_000)
        # Unrelated strings with an expiry and big values: nothing of them is read either.
        client = RedisClient(port=self.server.port)
        for i in range(5):
            client("SET", f"big:{i}", "v" * 1_000_000, "PX", 600_000)
        client.close()
        holders = [self.start(["run", f"lock:{i}", "--", "sleep", "60"]) for i in range(3)]
        holders.append(self.start(["run", "--limit", "2", "lock:sem", "--", "sleep", "60"]))
        wait_until(lambda: self.server.cmd("EXISTS", "lock:0", "lock:1", "lock:2") == 3, 10,
                   "the holders")
        wait_until(lambda: self.server.cmd("ZCARD", "{lock:sem}:rlock:sem") == 1, 10,
                   "the semaphore's holder")
        self.server.cmd("SET", "foreign:lock", "f47ac10b", "PX", 600_000)
        # A key once locked and free now: its counter is found, and it is not listed.
        self.assertEqual(self.run_rlock(["run", "lock:done", "--", "true"]).returncode, 0)

        gets = self.gets()
        out = self.server.cmd("INFO", "stats")
        sent_before = int(out.split("total_net_output_bytes:")[1].split()[0])
        r = self.run_rlock(["list"])
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = [line.split()[0] for line in r.stdout.splitlines()]
        self.assertEqual(listed, ["lock:0", "lock:1", "lock:2", "lock:sem"])
        # A few reads per lock found, none per unrelated key.
        self.assertLessEqual(self.gets() - gets, 4 * 5, "GETs for 4 locks (and a free one)")
        out = self.server.cmd("INFO", "stats")
        sent = int(out.split("total_net_output_bytes:")[1].split()[0]) - sent_before
        self.assertLess(sent, 2_000_000, "bytes sent for list: no big value among them")

        # With a pattern, other software's expiring locks that match are listed too.
        r = self.run_rlock(["list", "*lock*"])
        listed = [line.split()[0] for line in r.stdout.splitlines()]
        self.assertEqual(listed, ["foreign:lock", "lock:0", "lock:1", "lock:2", "lock:sem"])
        self.assertIn("held  by another client", r.stdout)
        self.assertEqual(self.listed("lock:1*"), ["lock:1"])
        self.assertEqual(self.listed("--prefix", "foreign:"), ["foreign:lock"])
        for p in holders:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=10)

    def test_a_lock_held_longer_than_the_retention_is_listed(self):
        # Renewals keep the fence counter: the lock stays findable for as long as it is held.
        holders = [self.start(["run", "--ttl", "600ms", "--retention", "1s", "long", "--",
                               "sleep", "60"]),
                   self.start(["run", "--ttl", "600ms", "--retention", "1s", "--limit", "2",
                               "sem", "--", "sleep", "60"])]
        wait_until(lambda: self.listed() == ["long", "sem"], 10, "both holders listed")
        until = time.monotonic() + 3  # three times the retention, looking all along
        while time.monotonic() < until:
            self.assertEqual(self.listed(), ["long", "sem"])
        self.assertGreater(self.server.cmd("PTTL", "{long}:rlock:fence"), 0)
        for p in holders:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=10)

    def test_patterns_are_redis_globs(self):
        # Redis reads "[!a]" as the set of '!' and 'a' (it negates with '^'); so does list.
        holders = [self.start(["run", key, "--", "sleep", "60"]) for key in ("!x", "bx")]
        wait_until(lambda: self.server.cmd("EXISTS", "!x", "bx") == 2, 10, "the holders")
        self.assertEqual(self.listed("[!a]x"), ["!x"])
        self.assertEqual(self.listed("[^a]x"), ["!x", "bx"])
        for p in holders:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=10)

    def test_a_key_that_is_its_own_hash_tag(self):
        # "{a}" and "a" name the same helper keys; list tells which one is held.
        p = self.start(["run", "{a}", "--", "sleep", "60"])
        wait_until(lambda: self.server.cmd("EXISTS", "{a}") == 1, 10, "the holder of {a}")
        self.assertEqual(self.listed(), ["{a}"])
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)


class ListAtScale(RedisTestCase):
    """`list` with many locks held: a few commands per lock, its memory the names' alone, and
    its output printed as the locks are read (bench/list_scale.py measures the time)."""

    def hold_many(self, start, count):
        """Locks bench:START ... held by this test's process (alive, on this host: list judges
        each holder), with their fence counters; written in batches over one connection."""
        if not hasattr(self, "template"):
            r = self.run_rlock(["acquire", "--ttl", "10m", "template"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.template = self.server.cmd("GET", "template")
            self.server.cmd("DEL", "template", "{template}:rlock:fence")
        client = RedisClient(port=self.server.port, timeout=30)
        try:
            for first in range(start, start + count, 1000):
                args = []
                for i in range(first, min(start + count, first + 1000)):
                    value = re.sub(r"^rlock/1 \w+ ", f"rlock/1 {i:032x} ", self.template)
                    args += [f"bench:{i}", re.sub(r" fence=\d+$", f" fence={i + 1}", value),
                             "{" + f"bench:{i}" + "}:rlock:fence", i + 1]
                client("MSET", *args)
        finally:
            client.close()

    def calls(self, command=None):
        total = 0
        for line in self.server.cmd("INFO", "commandstats").splitlines():
            m = re.match(r"cmdstat_([\w|]+):calls=(\d+)", line)
            if m and (m.group(1) == command or
                      (command is None and m.group(1) not in ("info", "config|resetstat"))):
                total += int(m.group(2))
        return total

    def list_rss(self, *args):
        """rlock list ARGS run to the end: (its peak RSS in MB, its stdout lines)."""
        out = self.path("out")
        with open(out, "w") as f:
            p = subprocess.Popen([RLOCK, "list", *args], env=rlock_env(self.server), stdout=f,
                                 stderr=subprocess.PIPE)
            _, status, usage = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
        self.assertEqual(p.returncode, 0, p.stderr.read())
        p.stderr.close()
        with open(out) as f:
            return usage.ru_maxrss / 1024, f.read().splitlines()

    def test_a_few_commands_per_lock(self):
        n = 5000
        self.hold_many(0, n)
        for args in ([], ["--json"]):
            self.server.cmd("CONFIG", "RESETSTAT")
            r = self.run_rlock(["list", *args])
            self.assertEqual(r.returncode, 0, r.stderr)
            # The look (TYPE of the key), GETRANGE of the value (64 KiB at most), PTTL, the
            # waiters, the history and the pause (GET): 6 a lock, and a few SCAN and TIME for
            # all (18 before).
            self.assertLessEqual(self.calls() / n, 6.1, self.server.cmd("INFO", "commandstats"))
            self.assertEqual(self.calls("getrange"), n)
            self.assertEqual(self.calls("get"), n)

    @unittest.skipIf(os.environ.get("RLOCK_SANITIZE"),
                     "a sanitizer keeps freed memory aside (ASan's quarantine): RSS tells of it")
    def test_memory_does_not_grow_with_the_locks(self):
        self.hold_many(0, 2000)
        small = {form: self.list_rss(*form) for form in ((), ("--json",))}
        self.hold_many(2000, 18000)
        for form, (rss_small, lines) in small.items():
            rss, lines = self.list_rss(*form)
            if not form:
                self.assertEqual(len(lines), 20000)
            # 18,000 more locks: the sorted names (under 2 MB), not the states (before: 30 MB
            # more for the text, 130 MB for the JSON).
            self.assertLess(rss - rss_small, 8, (form, rss_small, rss))

    def test_output_is_printed_as_the_locks_are_read(self):
        n = 20000
        self.hold_many(0, n)
        for args in ([], ["--json"]):
            gets = self.calls("get")
            # The pipe nearly full: rlock writes a batch once it is read, and now waits.
            p, read_end = self.start_unread(*args)
            self.assertLess(self.calls("get") - gets, n // 4, "read before printing")
            with os.fdopen(read_end, "rb") as f:
                out = f.read()
            self.assertEqual(p.wait(timeout=30), 0, p.stderr.read())
            p.stderr.close()
            if args:
                self.assertEqual(len(json.loads(out)["locks"]), n)
            else:
                self.assertEqual(len(out.splitlines()), n)

    def start_unread(self, *args):
        """rlock list ARGS writing into a pipe nobody reads yet, once the pipe is nearly full:
        (process, the pipe's read end)."""
        read_end, write_end = os.pipe()
        size = fcntl.fcntl(write_end, getattr(fcntl, "F_GETPIPE_SZ", 1032))
        p = subprocess.Popen([RLOCK, "list", *args], env=rlock_env(self.server),
                             stdout=write_end, stderr=subprocess.PIPE, text=True)
        os.close(write_end)

        def unread():
            buf = array.array("i", [0])
            fcntl.ioctl(read_end, termios.FIONREAD, buf)
            return buf[0]
        wait_until(lambda: unread() >= size - 4096, 30, "the pipe full")
        return p, read_end

    def test_redis_failing_partway_leaves_what_was_printed_and_exits_69(self):
        n = 20000
        self.hold_many(0, n)
        try:
            p, read_end = self.start_unread()
            self.server.kill()
            with os.fdopen(read_end, "rb") as f:
                out = f.read().decode()
            self.assertEqual(p.wait(timeout=30), 69)
            self.assertIn("rlock: error", p.stderr.read())
            p.stderr.close()
            lines = out.splitlines()
            self.assertTrue(out.endswith("\n") and 0 < len(lines) < n, len(lines))
            self.assertEqual(lines, sorted(lines, key=lambda line: line.split()[0]))
        finally:
            self.server.restart()

    def test_a_reader_gone_ends_list(self):
        # SIGPIPE ignored (as some daemons leave it for their children): the write fails, and
        # list ends as before, with the reading of the locks stopped.
        self.hold_many(0, 20000)
        p = subprocess.Popen([RLOCK, "list"], env=rlock_env(self.server), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN))
        self.assertTrue(p.stdout.readline().startswith("bench:0 "))
        p.stdout.close()
        self.assertEqual(p.wait(timeout=30), 125)
        self.assertIn("write to stdout", p.stderr.read())
        p.stderr.close()

    def test_json_is_one_document_as_before(self):
        # Written lock by lock, the document is the one a JSON library prints of it: indented
        # by 2, keys sorted, an empty list as [].
        r = self.run_rlock(["list", "--json"])
        self.assertEqual((r.returncode, r.stdout), (0, '{\n  "locks": []\n}\n'))
        self.hold_many(0, 3)
        # A lock kept after its run (with a last run), a semaphore, another program's lock.
        r = self.run_rlock(["run", "--min-hold", "60s", "bench:ran", "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.run_rlock(["acquire", "--limit", "2", "bench:sem"]).returncode, 0)
        self.server.cmd("SET", "bench:foreign", 'caf\u00e9 "\x01\n', "PX", 60000)
        for args, keys in (([], ["bench:0", "bench:1", "bench:2", "bench:ran", "bench:sem"]),
                           (["bench:*"], ["bench:0", "bench:1", "bench:2", "bench:foreign",
                                          "bench:ran", "bench:sem"])):
            r = self.run_rlock(["list", "--json", *args])
            doc = json.loads(r.stdout)
            self.assertEqual([l["key"] for l in doc["locks"]], keys)
            self.assertIsNotNone(doc["locks"][3 if not args else 4]["last_run"])
            self.assertEqual(r.stdout, json.dumps(doc, indent=2, sort_keys=True,
                                                  ensure_ascii=False) + "\n")
