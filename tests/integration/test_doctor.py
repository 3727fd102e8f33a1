"""rlock doctor: each finding against a server set up to show it, the exit status, and that
doctor changes nothing in Redis (rdb_changes_since_last_save, which counts every write)."""
import json
import os
import re
import shutil
import tempfile
import unittest

from harness import (IdleClosingProxy, RedisServer, documented_acl, free_port, run_rlock,
                     start_cluster)
from test_connection import make_certificates, tls_server
from test_failover import Topology

TUNED = ("--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory", "100mb",
         "--maxmemory-policy", "noeviction", "--notify-keyspace-events", "Kg$xz")


def doctor(url, *args):
    return run_rlock(["--redis", url, "doctor", *args], timeout=60)


def lines(r, level, topic):
    """The lines of doctor's text at LEVEL about TOPIC."""
    return [l for l in r.stdout.splitlines()
            if re.match(rf"\s+{level}\s+{topic}\s", l)]


def writes(server):
    return int(re.search(r"rdb_changes_since_last_save:(\d+)",
                         server.cmd("INFO", "persistence")).group(1))


class Doctor(unittest.TestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()

    def server(self, *args):
        s = RedisServer(*args)
        self.servers.append(s)
        return s

    def test_no_persistence_and_an_evicting_policy_are_both_named(self):
        s = self.server("--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
        before = writes(s)
        r = doctor(s.url)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(len(lines(r, "problem", "persistence")), 1, r.stdout)
        self.assertIn('none (appendonly no, save "")', lines(r, "problem", "persistence")[0])
        self.assertIn("set appendonly yes", lines(r, "problem", "persistence")[0])
        eviction = lines(r, "problem", "eviction")
        self.assertEqual(len(eviction), 1, r.stdout)
        self.assertIn("allkeys-lru", eviction[0])
        self.assertIn("noeviction", eviction[0])
        self.assertIn("2 problems", r.stdout)
        j = json.loads(doctor(s.url, "--json").stdout)
        problems = {f["topic"] for f in j["findings"] if f["level"] == "problem"}
        self.assertEqual(problems, {"persistence", "eviction"})
        # Read-only: no write, no key.
        self.assertEqual(writes(s), before)
        self.assertEqual(s.cmd("DBSIZE"), 0)

    def test_rdb_snapshots_alone_are_a_problem_too(self):
        s = self.server("--save", "3600 1")
        r = doctor(s.url)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn('RDB snapshots only (appendonly no, save "3600 1")',
                      lines(r, "problem", "persistence")[0])

    def test_a_tuned_server_is_fine(self):
        s = self.server(*TUNED)
        before = writes(s)
        r = doctor(s.url)
        self.assertEqual(writes(s), before)
        self.assertEqual(s.cmd("DBSIZE"), 0)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("0 problems", r.stdout)
        for topic in ("version", "persistence", "eviction", "notifications", "clock",
                      "commands", "failover"):
            self.assertEqual(len(lines(r, "ok", topic)), 1, topic + "\n" + r.stdout)

    def test_the_documented_acl_user_sees_what_it_could_not_check(self):
        # docs/REDIS.md "Least privilege": INFO but no CONFIG GET.
        s = self.server(*TUNED)
        s.restrict(documented_acl())
        r = doctor(s.url)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("CONFIG GET is refused", lines(r, "unknown", "notifications")[0])
        self.assertIn("appendfsync unknown", lines(r, "ok", "persistence")[0])
        self.assertEqual(len(lines(r, "ok", "commands")), 1, r.stdout)
        self.assertEqual(len(lines(r, "ok", "eviction")), 1, r.stdout)

    def test_a_command_the_acl_denies_is_named(self):
        s = self.server(*TUNED)
        s.restrict(documented_acl() + [["-pexpire", "-lpop"]])
        before = writes(s)
        r = doctor(s.url)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        denied = lines(r, "problem", "commands")
        self.assertEqual(len(denied), 1, r.stdout)
        self.assertIn("the ACL user may not run PEXPIRE (rlock's scripts", denied[0])
        self.assertIn("LPOP (stop)", denied[0])
        self.assertNotIn("TIME", denied[0])
        self.assertEqual(writes(s), before)

    def test_key_patterns_that_leave_out_the_lock_are_named(self):
        s = self.server(*TUNED)
        s.restrict(documented_acl() + [["resetkeys", "~other:*", "~{other:*"]])
        r = doctor(s.url, "lock:daily")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("leave out lock:daily's own keys", lines(r, "problem", "commands")[0])
        self.assertEqual(doctor(s.url, "other:daily").returncode, 0)

    def test_an_on_call_user_is_told_only_what_it_lacks(self):
        s = self.server(*TUNED)
        s.restrict([["resetkeys", "~lock:*", "~{lock:*", "resetchannels", "-@all", "+@read",
                     "+time", "+select", "-@dangerous", "+info", "+cluster|slots"]])
        r = doctor(s.url, "lock:x")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("kept output", "".join(lines(r, "note", "commands")))
        # No scripts: the writes it may not make are not even tried.
        self.assertIn("EVALSHA, EVAL (rlock's scripts", lines(r, "problem", "commands")[0])
        self.assertIn("EVAL_RO", lines(r, "unknown", "commands")[0])

    def test_unreachable_is_69(self):
        r = doctor(f"redis://127.0.0.1:{free_port()}")
        self.assertEqual(r.returncode, 69, r.stdout + r.stderr)
        self.assertEqual(len(lines(r, "problem", "reach")), 1, r.stdout)

    def test_a_proxy_between_is_named(self):
        s = self.server(*TUNED)
        proxy = IdleClosingProxy(s.port, idle=30)
        try:
            r = doctor(f"redis://127.0.0.1:{proxy.port}")
        finally:
            proxy.close()
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn(f"127.0.0.1:{s.port}", lines(r, "note", "proxy")[0])

    def test_a_certificate_about_to_expire_is_a_problem(self):
        certs = tempfile.mkdtemp(prefix="rlock-tls-")
        self.addCleanup(shutil.rmtree, certs, True)
        make_certificates(certs)  # valid for two days
        port = free_port()
        s = tls_server(certs, port)
        self.servers.append(s)
        r = doctor(f"rediss://127.0.0.1:{port}", "--cacert", os.path.join(certs, "ca.crt"))
        tls = lines(r, "problem", "tls")
        self.assertEqual(len(tls), 1, r.stdout + r.stderr)
        self.assertRegex(tls[0], r"expires on \d{4}-\d\d-\d\d \(in [12] days?\)")

    def test_redlock_names_the_node_down_and_counts_the_quorum(self):
        nodes = [self.server(*TUNED) for _ in range(3)]
        nodes[1].stop()
        args = []
        for n in nodes:
            args += ["--redis", n.url]
        r = run_rlock(args + ["doctor"], timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f":{nodes[1].port}", "".join(lines(r, "problem", "reach")))
        self.assertIn("2 of 3 servers answer", lines(r, "ok", "quorum")[0])
        for n in (nodes[0], nodes[2]):
            self.assertEqual(n.cmd("DBSIZE"), 0)


class DoctorSentinel(unittest.TestCase):
    """One replica, --min-replicas 1 (the default behind Sentinel): a planned failover waits
    for the old primary's full resync, after Redis 7.0's default repl-diskless-sync-delay
    (5 s), and outlasts a 10 s ttl."""

    @classmethod
    def setUpClass(cls):
        cls.topology = Topology(replicas=1, primary_args=TUNED)

    @classmethod
    def tearDownClass(cls):
        cls.topology.close()

    def test_the_failover_window_and_a_safe_ttl(self):
        primary = self.topology.servers[0]
        before = writes(primary)
        r = run_rlock(["--redis", self.topology.url, "doctor", "--ttl", "10s"], timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        failover = lines(r, "problem", "failover")
        self.assertEqual(len(failover), 1, r.stdout)
        # docs/DESIGN.md "Failover windows": lost, 1 s + a vote (1 s) + the switch (3 s) + a
        # host gone (2 s); planned, the switch, the old primary's demotion and resync (10 s)
        # and the delay (5 s).
        self.assertIn("about 7s when the primary is lost (down-after-milliseconds 1000",
                      failover[0])
        self.assertIn("18s when planned", failover[0])
        self.assertIn("repl-diskless-sync-delay 5s", failover[0])
        self.assertIn("use --ttl 37s or more", failover[0])
        r = run_rlock(["--redis", self.topology.url, "doctor", "--ttl", "37s"], timeout=60)
        self.assertEqual(len(lines(r, "ok", "failover")), 1, r.stdout)
        r = run_rlock(["--redis", self.topology.url, "doctor", "--ttl", "36s"], timeout=60)
        self.assertEqual(len(lines(r, "problem", "failover")), 1, r.stdout)
        self.assertEqual(len(lines(r, "ok", "sentinels")), 1, r.stdout)
        # One replica: once promoted, none is left to acknowledge but the old primary.
        self.assertIn("add a replica", lines(r, "problem", "replicas")[0])
        self.assertEqual(lines(r, "ok", "replicas"), [])
        self.assertEqual(len(lines(r, "ok", "persistence")), 1, r.stdout)  # the primary's
        self.assertEqual(writes(primary), before)
        self.assertEqual(primary.cmd("DBSIZE"), 0)


class DoctorSentinelAcl(unittest.TestCase):
    """docs/REDIS.md "Least privilege"'s user behind Sentinel, as a user of its own (the default user
    stays whole, for replication): +role, for rlock checks the primary with ROLE."""

    def test_the_documented_acl_user_and_one_without_role(self):
        t = Topology(replicas=1)
        try:
            for server in t.servers:
                for rules in documented_acl():
                    server.cmd("ACL", "SETUSER", "app", "on", ">app-secret", *rules)
            url = t.url.replace("redis-sentinel://", "redis-sentinel://app:app-secret@")
            r = run_rlock(["--redis", url, "run", "-n", "k", "--", "true"])
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run_rlock(["--redis", url, "doctor", "--ttl", "37s"], timeout=60)
            self.assertEqual(len(lines(r, "ok", "commands")), 1, r.stdout + r.stderr)
            for server in t.servers:
                server.cmd("ACL", "SETUSER", "app", "-role")
            r = run_rlock(["--redis", url, "doctor", "--ttl", "37s"], timeout=60)
            self.assertIn("ROLE", lines(r, "problem", "commands")[0])
            self.assertNotIn("app-secret", r.stdout + r.stderr)
        finally:
            t.close()


class DoctorCluster(unittest.TestCase):
    def test_masters_without_replicas_and_the_window(self):
        nodes = start_cluster("--cluster-node-timeout", "3000", *TUNED)
        try:
            before = [writes(n) for n in nodes]
            r = run_rlock(["--redis", nodes[0].url, "doctor", "--ttl", "15s"], timeout=60)
            # docs/REDIS.md "Least privilege"'s first line, and CLUSTER SLOTS: no CONFIG GET, no INFO.
            for n in nodes:
                n.restrict([documented_acl()[0], ["+cluster|slots"]])
            limited = run_rlock(["--redis", nodes[0].url, "doctor", "--ttl", "15s"], timeout=60)
            self.assertEqual([writes(n) for n in nodes], before)
        finally:
            for n in nodes:
                n.stop()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(len(lines(r, "problem", "replicas")), 3, r.stdout)
        failover = lines(r, "problem", "failover")
        self.assertIn("about 9s (twice cluster-node-timeout, 3s", failover[0])
        self.assertIn("a Cluster of 3 masters and 0 replicas", r.stdout)
        # Without INFO, CLUSTER SLOTS tells the Cluster; without CONFIG GET, the node timeout
        # is Redis's default, said as assumed.
        self.assertIn("a Cluster of 3 masters", limited.stdout, limited.stdout)
        self.assertIn("as assumed where CONFIG GET is refused",
                      lines(limited, "problem", "failover")[0])
        self.assertEqual(len(lines(limited, "problem", "replicas")), 3, limited.stdout)


if __name__ == "__main__":
    unittest.main()
