"""Operator and script verbs: status, inspect, list, acquire, extend, release, config, --json."""
import json
import os
import re
import shutil
import signal
import subprocess
import time
import unittest

from harness import (RLOCK, RedisServer, RedisTestCase, RespError, documented_acl, rlock_env,
                     wait_until)


class Operator(RedisTestCase):
    @staticmethod
    def read_text(path):
        try:
            with open(path) as f:
                text = f.read()
            return text.strip() if text.endswith("\n") else None
        except FileNotFoundError:
            return None

    def hold(self, key, *extra):
        """Starts `rlock run KEY -- sh` that writes its token, and returns (process, token)."""
        out = self.path("token-" + key.replace(":", "_"))
        p = self.start(["run", *extra, key, "--", "sh", "-c", f'echo "$RLOCK_TOKEN" > {out}; sleep 60'])
        token = wait_until(lambda: self.read_text(out), 10, "the token")
        return p, token

    def test_status_of_free_held_and_foreign_keys(self):
        p, token = self.hold("lock:daily-report")
        self.server.cmd("SET", "lock:java", "uuid-from-java-service", "PX", 60000)
        r = self.run_rlock(["status", "lock:daily-report", "lock:free", "lock:java"])
        self.assertEqual(r.returncode, 1, r.stderr)  # some key free
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 3)
        self.assertRegex(lines[0], rf"^lock:daily-report  held  by \S+ pid {p.pid} \(sh\)  for \S+  "
                                   rf"ttl \S+s  token {token[:8]}\.\.\.$")
        self.assertRegex(lines[1], r"^lock:free {10}free$")
        self.assertIn('held  by another client  ttl', lines[2])
        self.assertIn('value "uuid-from-java-service"', lines[2])
        r = self.run_rlock(["status", "lock:daily-report", "lock:java"])
        self.assertEqual(r.returncode, 0)
        r = self.run_rlock(["status", "--prefix", "lock:", "free"])
        self.assertEqual((r.returncode, r.stdout), (1, "lock:free  free\n"))

    def test_status_of_a_key_that_is_not_a_lock_is_69(self):
        self.server.cmd("HSET", "lock:h", "f", "v")
        r = self.run_rlock(["status", "lock:h"])
        self.assertEqual(r.returncode, 69)
        self.assertEqual(r.stdout, "lock:h  not a lock (hash)\n")
        self.assertEqual(self.server.cmd("HGET", "lock:h", "f"), "v")

    def test_status_with_redis_unreachable_is_69(self):
        from harness import free_port
        r = self.run_rlock(["status", "--redis", f"redis://127.0.0.1:{free_port()}", "k"])
        self.assertEqual(r.returncode, 69)
        self.assertIn("cannot connect", r.stderr)

    def test_inspect_shows_the_token_the_child_got(self):
        p, token = self.hold("lock:x", "--ttl", "20s")
        r = self.run_rlock(["inspect", "lock:x"])
        self.assertEqual(r.returncode, 0, r.stderr)
        fields = {line[:15].strip(): line[15:] for line in r.stdout.splitlines()}
        self.assertEqual(fields["token"], token)
        self.assertEqual(fields["state"], "held")
        self.assertIn(f"pid {p.pid}", fields["holder"])
        self.assertEqual(fields["command"], "sh")
        self.assertEqual(fields["fence"], self.server.cmd("GET", "{lock:x}:rlock:fence"))
        self.assertEqual(fields["fence counter"], fields["fence"])
        self.assertIn("ago)", fields["acquired at"])
        self.assertTrue(fields["value"].startswith(f"rlock/1 {token} "))
        r = self.run_rlock(["inspect", "--json", "lock:x"])
        doc = json.loads(r.stdout)
        self.assertEqual(doc["token"], token)
        self.assertEqual(doc["holder"]["pid"], p.pid)
        self.assertEqual(doc["fence"], int(fields["fence"]))
        self.assertEqual(doc["fence_counter"], doc["fence"])
        self.assertTrue(0 < doc["ttl_ms"] <= 20000)
        self.assertRegex(doc["acquired_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        r = self.run_rlock(["inspect", "lock:nothing"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("free", r.stdout)

    def test_a_dead_holder_on_this_host_is_shown_as_gone(self):
        # Alive while it runs (same host, same boot, same pid start).
        p, _ = self.hold("k", "--ttl", "20s")
        doc = json.loads(self.run_rlock(["status", "--json", "k"]).stdout)
        self.assertIs(doc["locks"][0]["holder_alive"], True)
        self.assertEqual(doc["locks"][0]["holder_liveness"], "running")
        self.assertIn("holder alive   yes", self.run_rlock(["inspect", "k"]).stdout)
        # On its host the command's own pid is shown: rlock's child, the sh it runs.
        pid = doc["locks"][0]["command_pid"]
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        self.assertIn("(sh)", stat)
        self.assertEqual(int(stat.rsplit(")", 1)[1].split()[1]), p.pid)  # its parent: rlock
        self.assertIn(f"command pid    {pid} (in ", self.run_rlock(["inspect", "k"]).stdout)
        # From another host's point of view: unknown.
        other = self.run_rlock(["inspect", "--json", "k"],
                               env=rlock_env(self.server, RLOCK_HOSTNAME="elsewhere"))
        self.assertIsNone(json.loads(other.stdout)["holder_alive"])
        self.assertIsNone(json.loads(other.stdout)["holder_liveness"])
        self.assertIsNone(json.loads(other.stdout)["command_pid"])
        # Gone: its process was SIGKILLed (the guardian takes the command with it).
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        value, pttl = self.server.cmd("GET", "k"), self.server.cmd("PTTL", "k")
        self.assertNotIn(" group=", value)  # run holds it itself: its pid is the holder's
        r = self.run_rlock(["status", "k"])
        self.assertRegex(r.stdout, r"holder process gone; the lock expires in \d")
        r = self.run_rlock(["inspect", "k"])
        self.assertRegex(r.stdout, r"holder alive   no, the process is gone; the lock expires in")
        doc = json.loads(self.run_rlock(["inspect", "--json", "k"]).stdout)
        self.assertIs(doc["holder_alive"], False)
        self.assertEqual(doc["holder_liveness"], "gone")
        busy = self.run_rlock(["run", "k", "--", "true"])
        self.assertIn("holder process gone", busy.stderr)
        # Nothing in Redis changed because of it.
        self.assertEqual(self.server.cmd("GET", "k"), value)
        self.assertLessEqual(self.server.cmd("PTTL", "k"), pttl)

    def test_a_dead_holder_of_a_semaphore_or_a_shared_lock_is_shown_as_gone(self):
        # As for a mutex: a place whose holder is gone stays until its ttl runs out, and the
        # text says so of that place (the JSON did already).
        for key, flags in (("sem", ["--limit", "2"]), ("shared", ["--shared"])):
            with self.subTest(key=key):
                holders = []
                for i in range(2):
                    out = self.path(f"token-{key}-{i}")
                    holders.append(self.start(["run", *flags, "--ttl", "60s", key, "--", "sh",
                                               "-c", f'echo "$RLOCK_TOKEN" > {out}; sleep 60']))
                    wait_until(lambda: self.read_text(out), 10, "the token")
                dead, alive = holders
                os.killpg(dead.pid, signal.SIGKILL)  # the guardian takes the command with it
                dead.wait(timeout=10)
                line = self.run_rlock(["status", key]).stdout
                self.assertRegex(line, rf"pid {dead.pid} \(sh\) \[holder process gone; its place "
                                       rf"expires in \d[^\]]*s\]")
                self.assertNotRegex(line, rf"pid {alive.pid} \(sh\) \[")
                # The same line, but for the time left, which runs on between the two.
                def timeless(text):
                    return re.sub(r"expires in [\d.]+m?s", "expires in T", text).splitlines()
                self.assertEqual(timeless(self.run_rlock(["list", key]).stdout), timeless(line))
                rows = [r for r in self.run_rlock(["inspect", key]).stdout.splitlines()
                        if r.startswith("holder ")]
                gone = [r for r in rows if f"pid {dead.pid} " in r]
                self.assertEqual(len(gone), 1, rows)
                self.assertRegex(gone[0], r"; holder process gone; its place expires in \d")
                self.assertNotIn("gone", next(r for r in rows if f"pid {alive.pid} " in r))
                doc = json.loads(self.run_rlock(["status", "--json", key]).stdout)["locks"][0]
                places = doc["semaphore_holders" if key == "sem" else "shared_holders"]
                self.assertEqual(sorted(h["holder_alive"] for h in places), [False, True])
                os.killpg(alive.pid, signal.SIGTERM)
                alive.wait(timeout=10)
                self.server.cmd("FLUSHALL")

    def test_a_reused_pid_is_not_taken_for_the_holder(self):
        # A value naming a live pid (this test's own) with another start time: that pid is not
        # the holder; it was reused.
        r = self.run_rlock(["run", "--min-hold", "20s", "k", "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        value = self.server.cmd("GET", "k")
        forged = re.sub(r" pid=\d+ ", f" pid={os.getpid()} ", value)
        self.server.cmd("SET", "k", forged, "PX", "20000")
        self.assertIn("holder process gone", self.run_rlock(["status", "k"]).stdout)
        # A value from an older rlock, without the start time: unknown, never "gone".
        self.server.cmd("SET", "k", re.sub(r" pstart=\d+", "", forged), "PX", "20000")
        doc = json.loads(self.run_rlock(["inspect", "--json", "k"]).stdout)
        self.assertIsNone(doc["holder_alive"])

    def test_list_all_shows_free_locks_with_their_last_run(self):
        # A job that failed and gave its lock back is invisible to list; --all shows it.
        self.assertEqual(self.run_rlock(["run", "job:failing", "--", "sh", "-c", "exit 3"]).returncode, 3)
        self.assertEqual(self.run_rlock(["run", "job:fine", "--", "true"]).returncode, 0)
        self.assertEqual(self.run_rlock(["run", "--history-length", "0", "job:quiet", "--", "true"])
                         .returncode, 0)
        self.assertEqual(self.run_rlock(["pause", "job:quiet", "--for", "1m"]).returncode, 0)
        self.assertEqual(self.run_rlock(["list"]).stdout, "")
        r = self.run_rlock(["list", "--all"])
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual([l.split()[0] for l in lines], ["job:failing", "job:fine", "job:quiet"])
        self.assertRegex(lines[0], r"^job:failing\s+free  last run: exit 3 on ")
        self.assertIn("paused by", lines[2])
        doc = json.loads(self.run_rlock(["list", "--all", "--json", "job:f*"]).stdout)
        self.assertEqual([(l["key"], l["state"], l["last_run"]["exit_status"]) for l in doc["locks"]],
                         [("job:failing", "free", 3), ("job:fine", "free", 0)])
        # A free lock with neither a history nor a pause is left out.
        self.server.cmd("DEL", "{job:quiet}:rlock:pause")
        self.assertNotIn("job:quiet", self.run_rlock(["list", "--all"]).stdout)
        # A key paused before it was ever used, and a held one that is paused, are shown.
        self.assertEqual(self.run_rlock(["pause", "job:new", "--for", "1m"]).returncode, 0)
        p, _ = self.hold("job:held")
        self.assertEqual(self.run_rlock(["pause", "job:held", "--for", "1m"]).returncode, 0)
        lines = self.run_rlock(["list", "--all"]).stdout.splitlines()
        self.assertEqual([l.split()[0] for l in lines],
                         ["job:failing", "job:fine", "job:held", "job:new"])
        self.assertIn("paused by", lines[2])
        self.assertRegex(lines[3], r"^job:new\s+free  paused by ")

    def test_list_finds_locks_among_20000_unrelated_keys_with_scan(self):
        c = self.server.client()
        # 20,000 unrelated keys, strings with and without TTL and hashes, some under the prefix.
        for batch in range(20):
            args = []
            for i in range(1000):
                args += [f"cache:{batch}:{i}", "x"]
            c("MSET", *args)
        for i in range(200):
            c("HSET", f"lock:not-a-lock:{i}", "f", "v")
            c("SET", f"lock:plain-data:{i}", "no ttl, not a lock")
        c.close()
        held = [self.hold(f"lock:job{i}")[1] for i in range(3)]
        self.server.cmd("SET", "lock:foreign", "uuid", "PX", 60000)
        self.server.cmd("CONFIG", "RESETSTAT")
        start = time.monotonic()
        r = self.run_rlock(["list", "--prefix", "lock:"])
        elapsed = time.monotonic() - start
        self.assertEqual(r.returncode, 0, r.stderr)
        keys = [line.split()[0] for line in r.stdout.splitlines()]
        self.assertEqual(keys, ["lock:foreign", "lock:job0", "lock:job1", "lock:job2"])  # sorted
        self.assertLess(elapsed, 10)
        stats = self.server.cmd("INFO", "commandstats")
        self.assertIn("cmdstat_scan:", stats)
        self.assertNotIn("cmdstat_keys:", stats)
        doc = json.loads(self.run_rlock(["list", "--json", "--prefix", "lock:", "job*"]).stdout)
        self.assertEqual([l["key"] for l in doc["locks"]], ["lock:job0", "lock:job1", "lock:job2"])
        self.assertEqual(sorted(l["token"] for l in doc["locks"]), sorted(held))
        # Helper keys (fence counters) are never shown as locks.
        r = self.run_rlock(["list"])
        self.assertNotIn(":rlock:", r.stdout)

    def test_extend_keeps_the_ttl_the_lock_was_taken_with(self):
        # Without --ttl, extend renews for the lock's own ttl: a 5m lock is not cut to 30s,
        # nor is a shared place or a semaphore's slot; a config file's ttl does not count.
        config = self.path("config.toml")
        with open(config, "w") as f:
            f.write('ttl = "2s"\n')

        def ttl_left(key):
            state = json.loads(self.run_rlock(["status", "--json", key]).stdout)["locks"][0]
            holders = [h for field in ("shared_holders", "semaphore_holders")
                       for h in state.get(field) or []]
            return holders[0]["ttl_ms"] if holders else self.server.cmd("PTTL", key)

        for kind in ([], ["--shared"], ["--limit", "2"]):
            with self.subTest(kind=kind):
                key = "k" + "".join(kind)
                token = self.run_rlock(["acquire", "--ttl", "5m", *kind, key]).stdout.strip()
                self.assertRegex(token, r"^[0-9a-f]{32}$")
                if not kind:
                    self.server.cmd("PEXPIRE", key, 20000)  # as if most of it had run out
                r = self.run_rlock(["extend", "--config", config, key, "--token", token])
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertGreater(ttl_left(key), 240000)
                r = self.run_rlock(["extend", key, "--token", token, "--ttl", "40s"])
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertLessEqual(ttl_left(key), 40000)

    def test_acquire_extend_release_cycle(self):
        r = self.run_rlock(["acquire", "--ttl", "5s", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        self.assertRegex(r.stdout, r"^[0-9a-f]{32}\n$")  # only the token: t=$(rlock acquire k)
        value = self.server.cmd("GET", "k")
        self.assertTrue(value.startswith(f"rlock/1 {token} "))
        self.assertIn(f" pid={os.getpid()} ", value)  # the caller holds it, not rlock
        self.assertEqual(self.run_rlock(["acquire", "k"]).returncode, 75)
        self.assertEqual(self.run_rlock(["acquire", "-E", "7", "k"]).returncode, 7)
        self.assertLessEqual(self.server.cmd("PTTL", "k"), 5000)
        r = self.run_rlock(["extend", "k", "--token", token, "--ttl", "60s"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(self.server.cmd("PTTL", "k"), 50000)
        other = "0123456789abcdef0123456789abcdef"
        r = self.run_rlock(["release", "k", "--token", other])
        self.assertEqual(r.returncode, 1)
        self.assertIn("not ours", r.stderr)
        self.assertEqual(self.server.cmd("GET", "k"), value)
        r = self.run_rlock(["extend", "k", "--token", other])
        self.assertEqual(r.returncode, 1)
        r = self.run_rlock(["release", "k", "--token", token])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_no_lock("k")
        r = self.run_rlock(["extend", "k", "--token", token])
        self.assertEqual(r.returncode, 1)

    def test_acquire_json_and_wait(self):
        r = self.run_rlock(["acquire", "--json", "--ttl", "700ms", "k"])
        doc = json.loads(r.stdout)
        self.assertEqual(doc["key"], "k")
        self.assertEqual(doc["ttl_ms"], 700)
        self.assertEqual(doc["fence"], int(self.server.cmd("GET", "{k}:rlock:fence")))
        r = self.run_rlock(["acquire", "--wait", "10s", "k"])  # the first expires unextended
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_release_force_breaks_anyones_lock_and_says_whose(self):
        p, token = self.hold("k", "--ttl", "30s")
        r = self.run_rlock(["release", "--force", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"pid {p.pid} (sh)", r.stdout)
        self.assertIn("Nobody can take it until that holder has stopped", r.stdout)
        # A tombstone stands in for the lock, for what was left of it, naming who broke it.
        tomb = self.server.cmd("GET", "k")
        self.assertTrue(tomb.startswith(f"rlock/1 broken {token} host="), tomb)
        self.assertIn(" broken_by=", tomb)
        self.assertGreater(self.server.cmd("PTTL", "k"), 20000)
        status = self.run_rlock(["status", "k"])
        self.assertEqual(status.returncode, 0)  # not free: nobody can take it
        self.assertRegex(status.stdout, rf"^k  broken: \S+ pid {p.pid} \(sh\) was broken by "
                                        r"\S+@\S+ [\d.]+m?s ago; free once it has stopped, in "
                                        r"[\d.]+s at the latest\n$")
        self.assertEqual(json.loads(self.run_rlock(["status", "--json", "k"]).stdout)
                         ["locks"][0]["state"], "broken")
        doc = json.loads(self.run_rlock(["inspect", "--json", "k"]).stdout)
        self.assertEqual(doc["state"], "broken")
        self.assertEqual(doc["token"], token)
        self.assertIn("@", doc["broken"]["by"])
        busy = self.run_rlock(["run", "-n", "k", "--", "true"])
        self.assertEqual(busy.returncode, 75, busy.stderr)
        self.assertRegex(busy.stderr, rf"k: busy, held by \S+ pid {p.pid} \(sh\), broken by "
                                      r"\S+@\S+ \S+ ago; free once it has stopped")
        # Breaking it again changes nothing.
        again = self.run_rlock(["release", "--force", "k"])
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("already broken", again.stdout)
        self.assertEqual(self.server.cmd("GET", "k"), tomb)
        # The holder learns at its next renewal (ttl/3), its command is stopped (exit 76), and
        # its rlock then ends the tombstone: long before the 30 s it was given.
        self.assertEqual(p.wait(timeout=30), 76)
        self.assert_no_lock("k")
        r = self.run_rlock(["release", "--force", "k"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("was free", r.stdout)
        self.server.cmd("HSET", "h", "f", "v")
        r = self.run_rlock(["release", "--force", "h"])
        self.assertEqual(r.returncode, 69)
        self.assertEqual(self.server.cmd("HGET", "h", "f"), "v")

    def test_a_waiter_gets_the_lock_once_the_broken_holder_stopped(self):
        pid_file = self.path("holder-pid")
        p = self.start(["run", "--ttl", "30s", "k", "--", "sh", "-c",
                        f'echo $$ > {pid_file}; sleep 60'])
        holder = int(wait_until(lambda: self.read_text(pid_file), 10, "the holder's pid"))
        # The waiter's command fails (9) if the holder's command is still there when it runs.
        waiter = self.start(["run", "-w", "60s", "k", "--", "sh", "-c",
                             f"! kill -0 {holder} 2>/dev/null || exit 9"])
        wait_until(lambda: self.server.cmd("ZCARD", "{k}:rlock:queue") == 1, 10, "the waiter")
        self.assertEqual(self.run_rlock(["release", "--force", "k"]).returncode, 0)
        self.assertEqual(waiter.wait(timeout=20), 0, "the waiter ran while the broken holder ran")
        self.assertEqual(p.wait(timeout=10), 76)

    def test_release_force_now_deletes_at_once_with_a_warning(self):
        p, _ = self.hold("k", "--ttl", "30s")
        r = self.run_rlock(["release", "--force", "--now", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("released by force (--now)", r.stdout)
        self.assertIn("overlaps", r.stderr)
        self.assert_no_lock("k")
        self.assertEqual(self.run_rlock(["run", "-n", "k", "--", "true"]).returncode, 0)
        self.assertEqual(p.wait(timeout=30), 76)
        # --now also ends a tombstone.
        self.server.cmd("SET", "t", "x", "PX", 60000)
        self.assertEqual(self.run_rlock(["release", "--force", "t"]).returncode, 0)
        self.assertTrue(self.server.cmd("GET", "t").startswith("rlock/1 broken - "))
        r = self.run_rlock(["release", "--force", "--now", "t"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("free now", r.stdout)
        self.assert_no_lock("t")

    def test_release_force_of_one_token_only(self):
        p, token = self.hold("k", "--ttl", "30s")
        value = self.server.cmd("GET", "k")
        r = self.run_rlock(["release", "--force", "--token", "0" * 32, "k"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("not by that token; nothing changed", r.stderr)
        self.assertEqual(self.server.cmd("GET", "k"), value)
        r = self.run_rlock(["release", "--force", "--token", token, "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(p.wait(timeout=30), 76)

    def test_a_lock_without_expiry_is_not_tombstoned(self):
        self.server.cmd("SET", "k", "held-for-ever")
        r = self.run_rlock(["release", "--force", "k"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no lease bounds its holder", r.stderr)
        self.assertEqual(self.server.cmd("GET", "k"), "held-for-ever")
        self.assertEqual(self.run_rlock(["release", "--force", "--now", "k"]).returncode, 0)
        self.assert_no_lock("k")

    def test_semaphore_places_broken_by_token_or_all(self):
        # Three holders of one semaphore "s". The first renews every 2s, so it learns of its
        # break long before the others renew (at 10s) and learn of theirs.
        outs = [self.path(f"tok{i}") for i in range(3)]
        procs = [self.start(["run", "--limit", "3", "--ttl", "6s" if i == 0 else "30s", "s", "--",
                             "sh", "-c", f'echo "$RLOCK_TOKEN" > {out}; sleep 60'])
                 for i, out in enumerate(outs)]
        tokens = [wait_until(lambda o=o: self.read_text(o), 10, "a token") for o in outs]
        before = self.server.cmd("ZRANGE", "{s}:rlock:sem", 0, -1)
        r = self.run_rlock(["release", "--force", "s"])
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("semaphore with 3 places", r.stderr)
        self.assertEqual(self.server.cmd("ZRANGE", "{s}:rlock:sem", 0, -1), before)
        r = self.run_rlock(["release", "--force", "--token", tokens[0], "s"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"s place {tokens[0]}: broken", r.stdout)
        self.assertIn(f"broken-{tokens[0]}", self.server.cmd("ZRANGE", "{s}:rlock:sem", 0, -1))
        self.assertEqual(procs[0].wait(timeout=30), 76)
        self.assertIsNone(procs[1].poll())
        # Its rlock ended the tombstone: two places taken, one free.
        wait_until(lambda: self.server.cmd("ZCARD", "{s}:rlock:sem") == 2, 10, "the place freed")
        r = self.run_rlock(["release", "--force", "--all", "s"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.splitlines()), 2, r.stdout)
        status = self.run_rlock(["status", "s"])
        self.assertEqual(status.stdout.count("broken ("), 2, status.stdout)
        for p in procs[1:]:
            self.assertEqual(p.wait(timeout=30), 76)
        wait_until(lambda: self.server.cmd("EXISTS", "{s}:rlock:sem") == 0, 10, "places freed")

    def test_config_json(self):
        r = self.run_rlock(["config", "--json", "--ttl", "9s"])
        doc = json.loads(r.stdout)
        self.assertEqual(doc["settings"]["ttl"], {"value": "9s", "origin": "flag", "where": "--ttl"})
        self.assertEqual(doc["settings"]["conflict-exit-code"]["origin"], "default")
        self.assertIsNone(doc["settings"]["max-run"])

    def test_bad_input_for_the_verbs(self):
        cases = [(["status"], "KEY is required"), (["status", ""], "KEY must not be empty"),
                 (["inspect"], "KEY is required"), (["extend", "k"], "--token is required"),
                 (["extend", "k", "--token", "xyz"], "not an rlock token"),
                 (["release", "k"], "give --token T, or --force"),
                 (["release", "k", "--now"], "--now goes with --force"),
                 (["release", "k", "--all", "--token", "0" * 32], "--all goes with --force"),
                 (["release", "k", "--force", "--all", "--token", "0" * 32], "not both"),
                 (["release", "k", "--force", "--token", "xyz"], "not an rlock token"),
                 (["acquire", "k", "--ttl", "0"], "--ttl"), (["list", "a", "b"], "unexpected argument 'b'")]
        for args, needle in cases:
            with self.subTest(args=args):
                r = self.run_rlock(args)
                self.assertEqual(r.returncode, 64, r.stderr)
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                self.assertIn(needle, r.stderr)
                self.assertEqual(self.server.cmd("DBSIZE"), 0)

    def test_readonly_replica_and_oom_are_clear(self):
        from harness import RedisServer
        replica = RedisServer("--replicaof", "127.0.0.1", str(self.server.port))
        try:
            r = self.run_rlock(["run", "--redis", replica.url, "k", "--", "true"])
            self.assertEqual(r.returncode, 69)
            self.assertIn("READONLY", r.stderr)
            self.assertIn("read-only replica", r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            # Reading still works there: an operator can look at a replica.
            r = self.run_rlock(["status", "--redis", replica.url, "k"])
            self.assertEqual(r.returncode, 1, r.stderr)
        finally:
            replica.stop()
        self.server.cmd("SET", "filler", "x" * 2_000_000)
        self.server.cmd("CONFIG", "SET", "maxmemory-policy", "noeviction")
        self.server.cmd("CONFIG", "SET", "maxmemory", "1")
        try:
            r = self.run_rlock(["run", "k", "--", "true"])
            self.assertEqual(r.returncode, 69)
            self.assertIn("OOM", r.stderr)
            self.assertIn("maxmemory", r.stderr)
            self.assertEqual(self.run_rlock(["status", "k"]).returncode, 1)
        finally:
            self.server.cmd("CONFIG", "SET", "maxmemory", "0")

    def test_colour_only_on_a_terminal_and_never_with_no_color(self):
        import pty
        import subprocess
        from harness import RLOCK, rlock_env
        self.server.cmd("SET", "k", "x", "PX", 60000)
        for no_color, coloured in ((None, True), ("1", False)):
            env = rlock_env(self.server)
            if no_color:
                env["NO_COLOR"] = no_color
            master, slave = pty.openpty()
            p = subprocess.Popen([RLOCK, "status", "k", "free"], stdout=slave, env=env)
            os.close(slave)
            out = b""
            while True:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            p.wait(timeout=10)
            os.close(master)
            self.assertEqual(b"\x1b[" in out, coloured, out)
        self.assertNotIn("\x1b[", self.run_rlock(["status", "k"]).stdout)



class InfoRenamedAway(RedisTestCase):
    """A server without INFO (rename-command INFO "", as managed services disable commands),
    reached as docs/REDIS.md "Least privilege"'s user: every verb works, list too, which asks CLUSTER
    SLOTS instead whether this is a Cluster."""

    @classmethod
    def setUpClass(cls):
        cls.server = RedisServer("--rename-command", "INFO", "")
        # All the documented rules but +info, which a server without INFO refuses to grant.
        cls.server.restrict([[r for r in rules if r != "+info"] for rules in documented_acl()])

    def test_every_verb_works(self):
        with self.assertRaisesRegex(RespError, "unknown command"):
            self.server.cmd("INFO", "cluster")
        r = self.run_rlock(["run", "job", "--", "sh", "-c", "echo ran"])
        self.assertEqual((r.returncode, r.stdout), (0, "ran\n"), r.stderr)
        token = self.run_rlock(["acquire", "--ttl", "60s", "k"]).stdout.strip()
        self.assertEqual(len(token), 32)
        r = self.run_rlock(["list"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([line.split()[:2] for line in r.stdout.splitlines()], [["k", "held"]])
        r = self.run_rlock(["list", "--json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([(l["key"], l["token"]) for l in json.loads(r.stdout)["locks"]],
                         [("k", token)])
        r = self.run_rlock(["status", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith("k  held  by "), r.stdout)
        self.assertEqual(self.run_rlock(["status", "job"]).returncode, 1)  # free
        r = self.run_rlock(["inspect", "--json", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["token"], token)
        r = self.run_rlock(["history", "job"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("exit 0", r.stdout)
        self.assertEqual(self.run_rlock(["release", "k", "--token", token]).returncode, 0)
        self.assertIsNone(self.server.cmd("GET", "k"))

    def test_a_user_denied_cluster_slots_too_is_told_why(self):
        """Without INFO, and CLUSTER SLOTS denied by the ACL, a Cluster cannot be told from a
        single server: list says so in one line (exit 69) rather than scan one node of what
        may be a Cluster."""
        self.server.cmd("ACL", "SETUSER", "default", "-cluster|slots")
        try:
            self.assertEqual(self.run_rlock(["acquire", "k"]).returncode, 0)
            r = self.run_rlock(["list"])
            self.assertEqual((r.returncode, r.stdout), (69, ""), r.stderr)
            lines = r.stderr.splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn("list needs INFO or CLUSTER SLOTS to tell a Cluster from a single "
                          "server, and both were refused (ERR unknown command 'INFO'", lines[0])
            self.assertIn("; NOPERM", lines[0])
        finally:
            self.server.cmd("ACL", "SETUSER", "default", "+cluster|slots")


class Containers(RedisTestCase):
    """A holder in a PID namespace of its own (a container sharing the host's name and boot) has
    a pid that means another process here: its liveness is unknown from here, never "gone"."""

    def test_a_holder_in_another_pid_namespace_is_not_called_gone(self):
        unshare = shutil.which("unshare")
        self.assertIsNotNone(unshare, "unshare(1) (util-linux) is needed")
        ready = self.path("ready")
        p = subprocess.Popen([unshare, "--pid", "--fork", "--mount-proc", RLOCK, "run", "k", "--",
                              "sh", "-c", f"echo $$ > {ready}; exec sleep 60"],
                             env=rlock_env(self.server), start_new_session=True,
                             stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        self.wait_file("ready")
        value = self.server.cmd("GET", "k")
        self.assertRegex(value, r" pid=1 .* pidns=\d+ ")  # rlock is the namespace's first process
        inspect = self.run_rlock(["inspect", "k"]).stdout
        self.assertIn("holder alive   unknown (another PID namespace on this host", inspect)
        status = self.run_rlock(["status", "k"]).stdout
        self.assertNotIn("gone", status)
        # Its pid is no pid of this host's, wherever a line names it.
        namespaced = "pid 1 is in another PID namespace than this rlock's"
        self.assertIn(namespaced, status)
        self.assertIn(namespaced, self.run_rlock(["list"]).stdout)
        self.assertIn(namespaced, self.run_rlock(["run", "-n", "k", "--", "true"]).stderr)
        j = json.loads(self.run_rlock(["inspect", "--json", "k"]).stdout)
        self.assertIsNone(j["holder_alive"])
        self.assertEqual(j["holder_liveness"], "other_pid_namespace")
        # From inside the namespace the same holder is judged, and alive.
        inside = subprocess.run(["nsenter", "--target", str(self.namespace_pid(p.pid)), "--pid",
                                 "--mount", RLOCK, "inspect", "--json", "k"],
                                env=rlock_env(self.server), capture_output=True, text=True)
        self.assertEqual(inside.returncode, 0, inside.stderr)
        self.assertEqual(json.loads(inside.stdout)["holder_liveness"], "running")
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)

    @staticmethod
    def namespace_pid(unshare_pid):
        """The host pid of unshare's child, the namespace's first process (rlock)."""
        with open(f"/proc/{unshare_pid}/task/{unshare_pid}/children") as f:
            return int(f.read().split()[0])


if __name__ == "__main__":
    unittest.main()
