"""An end of run that can be sent again: the release, the history entry, a period's end and a
semaphore's or shared lock's place are each applied once however often they arrive, so a run
sends them again after a connection closed under them (DESIGN.md "An end that can be sent
again"): none lost, none twice, no false "no longer ours"."""
import json
import threading
import unittest

from harness import RedisTestCase, ReplyLosingProxy, rlock_env, run_rlock

# What a run's end may say only when it went wrong.
ALARMS = ("no longer ours", "may not have been recorded", "could not", "overlapped")

KINDS = {"mutex": [], "semaphore": ["--limit", "2"], "shared": ["--shared"]}


class LostReplies(RedisTestCase):
    """The server runs the end, and the reply never comes back."""

    def setUp(self):
        super().setUp()
        # Every kind's scripts loaded, so that the first try is run (not answered NOSCRIPT).
        for args in [*KINDS.values(), ["--once-per", "day"]]:
            self.assertEqual(self.run_rlock(["run", *args, "warm", "--", "true"]).returncode, 0)

    def through(self, lose):
        proxy = ReplyLosingProxy(self.server.port, lose)
        self.addCleanup(proxy.close)
        return proxy, rlock_env(RLOCK_REDIS_URL=proxy.url)

    def history(self, key):
        r = self.run_rlock(["history", "--json", key])
        self.assertEqual(r.returncode, 0, r.stderr)
        return [(x["end"], x["exit_status"]) for x in json.loads(r.stdout)["runs"]]

    def assert_free(self, key):
        self.assert_no_lock(key)
        for helper in ("sem", "shared"):
            self.assertEqual(self.server.cmd("ZCARD", "{%s}:rlock:%s" % (key, helper)), 0)

    def test_a_release_and_its_history_entry_whose_reply_was_lost(self):
        for kind, args in KINDS.items():
            with self.subTest(kind=kind):
                ended = ("{%s}:rlock:ended" % kind).encode()
                proxy, env = self.through(lambda data: ended in data)
                r = run_rlock(["run", *args, kind, "--", "true"], env=env)
                self.assertEqual(proxy.lost, 1, "no reply was lost: the test proves nothing")
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assert_free(kind)
                self.assertEqual(self.history(kind), [("exited", 0)])

    def test_the_end_of_a_period_whose_reply_was_lost(self):
        proxy, env = self.through(lambda data: b":rlock:once:" in data and b"exited" in data)
        r = run_rlock(["run", "--once-per", "day", "daily", "--", "true"], env=env)
        self.assertEqual(proxy.lost, 1, "no reply was lost: the test proves nothing")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        slot = self.server.cmd("KEYS", "{daily}:rlock:once:*")[0]
        self.assertEqual(self.server.cmd("HMGET", slot, "state", "status"), ["done", "0"])
        again = self.run_rlock(["run", "--once-per", "day", "daily", "--", "true"])
        self.assertIn("already run this period", again.stderr)

    def test_a_release_by_hand_sent_again_finds_the_first(self):
        t1 = self.run_rlock(["acquire", "k"]).stdout.strip()
        self.assertEqual(self.run_rlock(["release", "k", "--token", t1]).returncode, 0)
        t2 = self.run_rlock(["acquire", "k"]).stdout.strip()
        # The first holder's release once more, the lock another's by now: found, and the
        # other's lock left as it is.
        r = self.run_rlock(["release", "k", "--token", t1])
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertIn(t2, self.server.cmd("GET", "k"))
        self.assertEqual(self.run_rlock(["release", "k", "--token", "0" * 32]).returncode, 1)
        self.assertEqual(self.run_rlock(["release", "k", "--token", t2]).returncode, 0)
        self.assertTrue(0 < self.server.cmd("PTTL", "{k}:rlock:ended") <= 60000)


class ConnectionKills(RedisTestCase):
    """Short runs while the server closes every connection each 100 ms."""

    def killing(self, stop):
        client = self.server.client()
        try:
            while not stop.wait(0.1):  # the pace of the kills, not a synchronisation
                client("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        finally:
            client.close()

    def test_every_run_is_in_the_history_once(self):
        runs = 8
        stop = threading.Event()
        killer = threading.Thread(target=self.killing, args=(stop,), daemon=True)
        killer.start()
        results = {}
        try:
            for kind, args in KINDS.items():
                results[kind] = [self.run_rlock(["run", *args, kind, "--", "sleep", "0.15"])
                                 for _ in range(runs)]
            results["once"] = [self.run_rlock(["run", "--once-per", "day", f"once-{i}", "--",
                                               "sleep", "0.15"]) for i in range(runs)]
        finally:
            stop.set()
            killer.join()
        for kind, rs in results.items():
            for r in rs:
                self.assertEqual(r.returncode, 0, (kind, r.stderr))
                for alarm in ALARMS:
                    self.assertNotIn(alarm, r.stderr, kind)
        for kind in KINDS:
            entries = self.server.cmd("XRANGE", "{%s}:rlock:history" % kind, "-", "+")
            pids = sorted(dict(zip(e[1][::2], e[1][1::2]))["pid"] for e in entries)
            self.assertEqual(len(pids), runs, (kind, entries))
            self.assertEqual(len(set(pids)), runs, (kind, entries))
            self.assert_no_lock(kind)
        for i in range(runs):
            slot = self.server.cmd("KEYS", f"{{once-{i}}}:rlock:once:*")[0]
            self.assertEqual(self.server.cmd("HMGET", slot, "state", "status"), ["done", "0"])
            self.assertEqual(self.server.cmd("XLEN", f"{{once-{i}}}:rlock:history"), 1)


if __name__ == "__main__":
    unittest.main()
