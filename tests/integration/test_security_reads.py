"""Reads with a bound (docs/DESIGN.md): whatever another Redis user wrote under rlock's keys, no
read verb's peak memory passes 64 MB, check finds the last success behind any number of
failures, and ACL denials and keys of another type are named."""
import json
import os
import re
import subprocess

from harness import RLOCK, RedisTestCase, rlock_env, run_measured

MB = 1 << 20
PEAK_MOST_KB = 64 * 1024


def send_all(server, commands, batch=2000):
    """COMMANDS pipelined to SERVER, BATCH at a time; every reply read (errors raise)."""
    c = server.client()
    try:
        for at in range(0, len(commands), batch):
            chunk = commands[at:at + batch]
            out = []
            for args in chunk:
                out.append(b"*%d\r\n" % len(args))
                for a in args:
                    a = a if isinstance(a, bytes) else str(a).encode()
                    out.append(b"$%d\r\n%s\r\n" % (len(a), a))
            c.sock.sendall(b"".join(out))
            for _ in chunk:
                c._read()
    finally:
        c.close()


class SecurityReads(RedisTestCase):
    def measured(self, args):
        """Runs rlock ARGS to its end: (returncode, stdout, stderr, peak RSS in kB), measured
        as harness.run_measured says."""
        r, peak = run_measured(args, self.path("peak"), rlock_env(self.server),
                               capture_output=True)
        return (r.returncode, r.stdout.decode(errors="replace"),
                r.stderr.decode(errors="replace"), peak)

    def assert_bounded(self, args):
        """Runs rlock ARGS and checks its peak RSS, except in a sanitizer build: ASan keeps freed
        memory aside (its quarantine, 256 MB) and TSan shadows every byte, so RSS there tells of
        the sanitizer. What the verb says and its exit code are checked in every build."""
        rc, out, err, peak = self.measured(args)
        if not os.environ.get("RLOCK_SANITIZE"):
            self.assertLess(peak, PEAK_MOST_KB, f"rlock {' '.join(args)} peaked at {peak} kB")
        return rc, out, err

    def helper(self, pattern):
        """The one key that SCAN finds under PATTERN (rlock's helper keys, asked of Redis)."""
        keys = [k for k in self.server.cmd("KEYS", pattern)]
        self.assertEqual(len(keys), 1, f"{pattern}: {keys}")
        return keys[0]

    def failure_entry(self, history, fence):
        return ["XADD", history, "*", "host", "web-1", "pid", "4121", "user", "ops", "cmd", "false",
                "since", "2026-01-01T00:00:00.000Z", "fence", str(fence), "waited_ms", "0",
                "held_ms", "5", "status", "1", "end", "exited"]

    def test_check_finds_a_success_behind_10500_failures(self):
        r = self.run_rlock(["run", "--history-length", "20000", "lock:job", "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        history = self.helper("*lock:job*rlock*history")
        send_all(self.server, [self.failure_entry(history, 10 + i) for i in range(10500)])
        rc, out, err = self.assert_bounded(["check", "lock:job", "--every", "2h"])
        self.assertEqual(rc, 0, out + err)
        self.assertRegex(out, r"^lock:job: ok, last success \S+Z on \S+ \(exit 0 after .*; "
                              r"since then at least 10000 failed: ")
        j = json.loads(self.run_rlock(["check", "--json", "lock:job", "--every", "2h"]).stdout)
        self.assertEqual((j["ok"], j["history_read_all"]), (True, False))
        # A history of an older rlock keeps no success beside it: check says what it read,
        # never that the history holds no success.
        self.server.cmd("DEL", self.helper("*lock:job*rlock*last-success"))
        r = self.run_rlock(["check", "lock:job", "--every", "2h"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("at least 10000 runs, all failed", r.stdout)
        self.assertIn("no success among its newest 10000 entries, and none kept beside them",
                      r.stdout)
        self.assertNotIn("no success in its history", r.stdout)

    def test_check_keeps_the_last_success_across_retries(self):
        r = self.run_rlock(["run", "--retry", "1", "--retry-delay", "10ms", "lock:job", "--", "sh",
                            "-c", f"test -e {self.path('second')} || {{ touch {self.path('second')}; exit 3; }}"])
        self.assertEqual(r.returncode, 0, r.stderr)
        kept = self.server.cmd("HGETALL", self.helper("*lock:job*rlock*last-success"))
        fields = dict(zip(kept[::2], kept[1::2]))
        self.assertEqual((fields["status"], fields["end"], fields["attempt"]), ("0", "exited", "2"))
        r = self.run_rlock(["run", "lock:job", "--", "false"])
        self.assertEqual(r.returncode, 1)
        r = self.run_rlock(["check", "lock:job", "--every", "1h"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("since then 1 failed", r.stdout)

    def test_history_of_100000_runs_is_paged(self):
        self.assertEqual(self.run_rlock(["run", "lock:job", "--", "true"]).returncode, 0)
        history = self.helper("*lock:job*rlock*history")
        send_all(self.server, [self.failure_entry(history, 10 + i) for i in range(100000)])
        rc, out, err = self.assert_bounded(["history", "-n", "100000", "lock:job"])
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(len(lines), 100001)
        self.assertTrue(lines[0].startswith("ACQUIRED AT"))
        rc, out, err = self.assert_bounded(["history", "--json", "-n", "100000", "lock:job"])
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual((doc["key"], len(doc["runs"])), ("lock:job", 100000))

    def kept_run(self):
        r = self.run_rlock(["run", "--keep-output", "64k", "lock:job", "--", "echo", "hi"])
        self.assertEqual(r.returncode, 0, r.stderr)
        return self.helper("*lock:job*rlock*outputs"), self.helper("*lock:job*rlock*output-*")

    def test_logs_stops_at_what_a_run_keeps(self):
        _, stream = self.kept_run()
        self.server.cmd("DEL", stream)
        piece = b"x" * 65536
        send_all(self.server, [["XADD", stream, f"{i * 65536}-1", "o", piece]
                               for i in range(1600)], batch=100)
        rc, out, err = self.assert_bounded(["logs", "lock:job"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out), 16 * MB)
        self.assertRegex(err, r"stopped after 16 MiB, the most a run keeps \(--keep-output\): "
                              r"the rest, from byte 16777216 on, was not written by rlock run")

    def test_logs_refuses_a_reply_larger_than_rlock_writes(self):
        _, stream = self.kept_run()
        send_all(self.server, [["XADD", stream, f"{100 + i * 10 * MB}-1", "o", b"y" * (10 * MB)]
                               for i in range(10)], batch=1)
        rc, _, err = self.assert_bounded(["logs", "lock:job"])
        self.assertNotEqual(rc, 0)
        self.assertIn("a reply of more than 8 MiB, which rlock never writes", err)

    def test_logs_reads_the_newest_of_100000_index_entries(self):
        index, _ = self.kept_run()
        send_all(self.server, [["ZADD", index, str(i + 1), f"{i + 1} rlock/1 x"]
                               for i in range(100000)])
        rc, out, err = self.assert_bounded(["logs", "lock:job"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "hi\n")
        self.assertIn("the index of kept outputs holds 100001 runs, of which rlock keeps 5: only "
                      "the newest 5 were read", err)

    def test_a_huge_value_is_read_in_part(self):
        send_all(self.server, [["SET", "lock:big", b"v" * (100 * MB), "PX", "600000"]], batch=1)
        for verb in (["status", "lock:big"], ["inspect", "lock:big"], ["list", "lock:*"],
                     ["status", "--json", "lock:big"]):
            rc, out, err = self.assert_bounded(verb)
            self.assertEqual(rc, 0, f"{verb}: {err}")
            self.assertIn("lock:big", out)
            self.assertLess(len(out), 1 * MB)

    def zadd_many(self, key, count, score):
        """COUNT short members added to the sorted set KEY, each with SCORE(i)."""
        commands = []
        for at in range(0, count, 1000):
            args = ["ZADD", key]
            for i in range(at, min(count, at + 1000)):
                args += [str(score(i)), f"m{i}"]
            commands.append(args)
        send_all(self.server, commands, batch=50)

    def test_a_queue_of_440k_waiters_is_read_in_part(self):
        self.assertEqual(self.run_rlock(["run", "lock:mem", "--", "true"]).returncode, 0)
        queue = self.helper("*lock:mem*rlock*fence").replace("fence", "queue")
        self.zadd_many(queue, 440000, lambda i: 1000 + i)
        for verb in (["status", "lock:mem"], ["inspect", "lock:mem"], ["list", "--all"],
                     ["check", "lock:mem", "--every", "1h"], ["history", "lock:mem"]):
            self.assert_bounded(verb)
        rc, out, _ = self.assert_bounded(["inspect", "lock:mem"])
        self.assertIn("439000 more waiters or places not shown (rlock reads at most 1000 of each)",
                      out)
        rc, out, _ = self.assert_bounded(["inspect", "--json", "lock:mem"])
        doc = json.loads(out)
        self.assertEqual((len(doc["queue"]), doc["not_shown"]), (1000, 439000))

    def test_a_semaphore_of_440k_places_is_read_in_part(self):
        r = self.run_rlock(["run", "--limit", "2", "lock:mem", "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        fence = self.helper("*lock:mem*rlock*fence")
        sem, holders = fence.replace("fence", "sem"), fence.replace("fence", "holders")
        until = int(self.server.cmd("TIME")[0]) * 1000 + 600000
        self.zadd_many(sem, 440000, lambda i: until + i)
        send_all(self.server, [["HSET", holders] + sum(([f"m{i}", f"rlock/1 m{i} host=h pid=1 "
                                                          f"fence={i}"]
                                                         for i in range(at, at + 1000)), [])
                               for at in range(0, 440000, 1000)], batch=50)
        for verb in (["status", "lock:mem"], ["inspect", "lock:mem"], ["list"],
                     ["status", "--json", "lock:mem"], ["check", "lock:mem", "--every", "1h"],
                     ["history", "lock:mem"]):
            rc, out, err = self.assert_bounded(verb)
            self.assertEqual(rc, 0, f"{verb}: {err}")
        rc, out, _ = self.assert_bounded(["status", "lock:mem"])
        self.assertIn("by 1000 (semaphore)", out)
        self.assertIn("439000 more waiters or places not shown", out)

    def test_check_of_3000_entries_of_40kb_keeps_few(self):
        self.assertEqual(self.run_rlock(["run", "lock:job", "--", "true"]).returncode, 0)
        history = self.helper("*lock:job*rlock*history")
        host = "h" * 40000
        entries = []
        for i in range(3000):
            entry = self.failure_entry(history, 10 + i)
            entry[entry.index("host") + 1] = host
            entries.append(entry)
        send_all(self.server, entries, batch=100)
        rc, out, err = self.assert_bounded(["check", "lock:job", "--every", "2h"])
        self.assertEqual(rc, 0, err)
        self.assertIn("since then 3000 failed: ", out)
        rc, out, err = self.assert_bounded(["check", "--json", "lock:job", "--every", "2h"])
        doc = json.loads(out)
        self.assertEqual((doc["failures_since_count"], len(doc["failures_since"])), (3000, 10))
        for verb in (["history", "-n", "3000", "lock:job"], ["status", "lock:job"],
                     ["inspect", "lock:job"], ["list"], ["logs", "lock:job"]):
            self.assert_bounded(verb)

    def deny(self, rule, undo):
        self.server.cmd("ACL", "SETUSER", "default", rule)
        self.addCleanup(self.server.cmd, "ACL", "SETUSER", "default", undo)

    def test_acl_denials_of_read_verbs_name_the_command_and_the_key(self):
        self.assertEqual(self.run_rlock(["run", "--keep-output", "64k", "lock:job", "--", "true"])
                         .returncode, 0)
        self.deny("-xrevrange", "+xrevrange")
        for verb in (["status", "lock:job"], ["inspect", "lock:job"], ["history", "lock:job"],
                     ["check", "lock:job", "--every", "1h"], ["watch", "lock:job"]):
            r = self.run_rlock(verb, timeout=20)
            self.assertNotEqual(r.returncode, 0, verb)
            self.assertRegex(r.stderr, r"the ACL user may not run XREVRANGE on \S*lock:job\S*rlock"
                                       r"\S*history", verb)
        self.deny("-zrevrange", "+zrevrange")
        r = self.run_rlock(["logs", "lock:job"])
        self.assertRegex(r.stderr, r"the ACL user may not run ZREVRANGE on \S*lock:job\S*rlock"
                                   r"\S*outputs")

    def test_a_helper_key_of_another_type_is_named(self):
        self.assertEqual(self.run_rlock(["run", "lock:job", "--", "true"]).returncode, 0)
        history = self.helper("*lock:job*rlock*history")
        self.server.cmd("DEL", history)
        self.server.cmd("SET", history, "someone else's")
        r = self.run_rlock(["status", "lock:job"])
        self.assertEqual(r.returncode, 1)  # free, and still readable
        self.assertIn(history + " holds another type than rlock keeps there", r.stderr)
        ended = self.helper("*lock:job*rlock*ended")
        self.server.cmd("DEL", history)
        self.server.cmd("DEL", ended)
        self.server.cmd("SET", ended, "someone else's")
        r = self.run_rlock(["run", "lock:job", "--", "true"])
        self.assertRegex(r.stderr, r"one of .*" + re.escape(ended) + r".* holds another type than "
                                   r"rlock keeps there")
        r = self.run_rlock(["status", "lock:job"])
        self.assertIn(ended, r.stderr)

    def test_watch_names_a_helper_key_of_another_type_once(self):
        self.assertEqual(self.run_rlock(["run", "lock:job", "--", "true"]).returncode, 0)
        ended = self.helper("*lock:job*rlock*ended")
        self.server.cmd("DEL", ended)
        self.server.cmd("SET", ended, "someone else's")
        # Polling, four reads a second: the warning is said once all the same.
        self.server.cmd("CONFIG", "SET", "notify-keyspace-events", "")
        watch = subprocess.Popen([RLOCK, "watch", "lock:job"], env=rlock_env(self.server),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.assertIn("lock:job", watch.stdout.readline())
            self.run_rlock(["run", "lock:job", "--", "sleep", "1.5"])
            # Its release, seen by a read at least six polls after the first.
            while "released" not in (line := watch.stdout.readline()):
                self.assertTrue(line, "watch ended before the release")
        finally:
            watch.terminate()
            _, err = watch.communicate(timeout=10)
        self.assertEqual(err.count(ended + " holds another type than rlock keeps there"), 1, err)
