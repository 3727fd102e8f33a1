"""Beyond one Redis: Redlock over independent masters, Sentinel with a failover, Redis Cluster,
and --min-replicas, each against real servers these tests start."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (REDIS_SENTINEL, RLOCK, BlackHole, DelayProxy, RedisClient, RedisServer,
                     RespError, cluster_owner, free_port, key_per_master, migrate_slot, rlock_env,
                     run_rlock, server_binary, start_cluster, start_rlock, stop_procs, wait_until)
from test_connection import make_certificates, tls_server

SECTION = os.environ.get("RLOCK_FAULT_SECTION") or os.path.join(
    os.path.dirname(RLOCK), "tests", "rlock_fault_section")


def env_without_url(**extra):
    return rlock_env(None, **extra)


class Procs:
    """rlock processes started by a test, killed (with their groups) at its end."""

    def __init__(self):
        self.procs = []

    def start(self, args, **kw):
        p = start_rlock(args, env=kw.pop("env", env_without_url()), **kw)
        self.procs.append(p)
        return p

    def close(self):
        stop_procs(self.procs)


class Redlock(unittest.TestCase):
    """Three independent masters: quorum 2."""

    def setUp(self):
        self.servers = [RedisServer() for _ in range(3)]
        self.urls = []
        for s in self.servers:
            self.urls += ["--redis", s.url]
        self.procs = Procs()
        self.tmp = tempfile.mkdtemp(prefix="rlock-redlock-")

    def tearDown(self):
        self.procs.close()
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_on_all(self, args, **kw):
        return run_rlock(args[:1] + self.urls + args[1:], env=env_without_url(), **kw)

    def values(self, key):
        return [s.cmd("GET", key) if s.proc.poll() is None else None for s in self.servers]

    def test_the_lock_is_on_every_master_with_one_token(self):
        marker = os.path.join(self.tmp, "ran")
        p = self.procs.start(["run"] + self.urls + ["k", "--", "sh", "-c",
                                                    f'echo $RLOCK_FENCE > {marker}; sleep 30'])
        wait_until(lambda: all(self.values("k")), 10, "the lock on all three masters")
        values = self.values("k")
        self.assertEqual(len({v.split()[1] for v in values}), 1, values)  # one token
        self.assertEqual(self.run_on_all(["run", "k", "--", "true"]).returncode, 75)
        status = self.run_on_all(["status", "k"])
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertIn("held", status.stdout)
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
        wait_until(lambda: not any(self.values("k")), 5, "the lock released on all three")
        # The fence is the largest of the quorum's counters (each master counts on its own,
        # from its clock; the one that answered after the quorum is not waited for): one of
        # them, and no smaller than the largest of any two.
        counters = [int(s.cmd("GET", "{k}:rlock:fence")) for s in self.servers]
        with open(marker) as f:
            fence = int(f.read())
        self.assertIn(fence, counters)
        self.assertGreaterEqual(fence, sorted(counters)[1])

    def test_one_master_down_still_a_quorum(self):
        self.servers[2].kill()
        r = self.run_on_all(["run", "k", "--", "sh", "-c", 'test -n "$RLOCK_TOKEN"'])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.values("k")[:2], [None, None])  # released

    def test_a_master_that_lost_the_lock_does_not_cost_it(self):
        # A master restarted without its data answers "not ours" to every renewal, as fast as
        # the others answer yes: two of three still hold the lock, and the run goes on.
        p = self.procs.start(["run", "-v"] + self.urls + ["--ttl", "600ms", "k", "--", "sleep",
                                                         "2.5"])
        wait_until(lambda: all(self.values("k")), 10, "the lock on all three")
        self.servers[0].cmd("FLUSHALL")
        self.assertEqual(p.wait(timeout=30), 0)
        # Not even a renewal failed: its "no" did not end a renewal before the second yes.
        self.assertNotIn("renewal failed", p.stderr.read())
        self.assertEqual(self.values("k"), [None, None, None])

    def test_history_shows_the_runs_recorded_on_every_master(self):
        # A run's history entry goes to the first master that answers its writer, so each
        # master holds some of the runs: here one on the first (written by a run against it
        # alone), and a later one on the second.
        def run_on(i, *command):
            return run_rlock(["run", "--redis", self.servers[i].url, "k", "--", *command],
                             env=env_without_url()).returncode
        self.assertEqual(run_on(0, "sh", "-c", "exit 3"), 3)
        self.assertEqual(run_on(1, "true"), 0)
        self.assertEqual([s.cmd("XLEN", "{k}:rlock:history") for s in self.servers], [1, 1, 0])
        r = self.run_on_all(["history", "--json", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        runs = json.loads(r.stdout)["runs"]
        self.assertEqual([run["exit_status"] for run in runs], [0, 3])  # newest first
        self.assertEqual(r.stderr, "")
        # An entry sent again after a lost reply may land on a second master: one run, once.
        entry = self.servers[1].cmd("XRANGE", "{k}:rlock:history", "-", "+")[0][1]
        self.servers[2].cmd("XADD", "{k}:rlock:history", "*", *entry)
        r = self.run_on_all(["history", "--json", "k"])
        self.assertEqual([run["exit_status"] for run in json.loads(r.stdout)["runs"]], [0, 3])
        self.servers[2].cmd("DEL", "{k}:rlock:history")
        # -n counts the runs of all masters together.
        r = self.run_on_all(["history", "--json", "-n", "1", "k"])
        self.assertEqual([run["exit_status"] for run in json.loads(r.stdout)["runs"]], [0])
        # A master down: what the others recorded, and a warning that names it.
        self.servers[1].kill()
        r = self.run_on_all(["history", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.splitlines()), 2, r.stdout)  # the header and one run
        self.assertIn(f"no answer from {self.servers[1].url}: the runs recorded there", r.stderr)
        # None answering: Redis unavailable.
        self.servers[0].kill()
        self.servers[2].kill()
        self.assertEqual(self.run_on_all(["history", "k"]).returncode, 69)

    def test_two_masters_down_no_quorum_no_command_nothing_left(self):
        self.servers[1].kill()
        self.servers[2].kill()
        marker = os.path.join(self.tmp, "ran")
        r = self.run_on_all(["run", "k", "--", "touch", marker])
        self.assertEqual(r.returncode, 69, r.stderr)
        # Two refusals settle it: the third node's answer is not waited for.
        self.assertRegex(r.stderr, r"on only [01] of 3 Redis nodes \(Redlock needs 2\)")
        self.assertFalse(os.path.exists(marker), "the command ran without a quorum")
        self.assertIsNone(self.servers[0].cmd("GET", "k"), "left on the surviving master")

    def black_holes(self, n):
        """N ports where a connect hangs (harness.BlackHole), each checked with a plain connect."""
        holes = [BlackHole() for _ in range(n)]
        for h in holes:
            self.addCleanup(h.close)
            self.assertTrue(h.hangs(), "a connect to the black hole was answered")
        return holes

    def test_a_known_no_does_not_wait_for_a_black_hole(self):
        # Five masters: three hold the lock (another client's), one lacks the scripts (asked
        # again with their source), one is black-holed. No quorum can say yes: busy at once,
        # not after the command timeout spent on the black hole.
        fresh = RedisServer()
        self.addCleanup(fresh.stop)
        for s in self.servers:
            self.assertEqual(run_rlock(["run", "--redis", s.url, "warm", "--", "true"],
                                       env=env_without_url()).returncode, 0)  # scripts loaded
            s.cmd("SET", "k", "another client", "PX", 60000)
        fresh.cmd("SCRIPT", "FLUSH")
        hole = self.black_holes(1)[0]
        urls = []
        for url in (fresh.url, hole.url, *[s.url for s in self.servers]):
            urls += ["--redis", url]
        begin = time.monotonic()
        r = run_rlock(["run"] + urls + ["--connect-timeout", "5s", "k", "--", "true"],
                      env=env_without_url())
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertLess(time.monotonic() - begin, 2, "the verdict waited for the black hole")
        self.assertIsNone(fresh.cmd("GET", "k"))

    def test_two_of_five_black_holed_cost_no_connect_timeout(self):
        # Five masters, two black-holed: the three that answer are a quorum, and neither the
        # acquire, nor a renewal, nor the release waits for the connect timeout (5 s).
        holes = self.black_holes(2)
        urls = []
        for url in (self.servers[0].url, holes[0].url, self.servers[1].url, holes[1].url,
                    self.servers[2].url):
            urls += ["--redis", url]
        started, late = os.path.join(self.tmp, "started"), os.path.join(self.tmp, "late")
        begin = time.monotonic()
        # --ttl 600ms: renewed every 200 ms, about ten times while the command runs. Under a
        # sanitizer a round of five renewals can take most of 600 ms (TSan lost the lock once,
        # 2026-12-07): 1.5s, renewed as many times over a longer command.
        ttl, run_for = (1.5, 5) if os.environ.get("RLOCK_SANITIZE") else (0.6, 2)
        p = self.procs.start(["run"] + urls + [
            "--connect-timeout", "5s", "--ttl", f"{int(ttl * 1000)}ms", "k", "--", "sh", "-c",
            f"touch {started}; sleep {run_for}; touch {late}; sleep 0.5"])
        wait_until(lambda: os.path.exists(started), 10, "the command to start")
        self.assertLess(time.monotonic() - begin, 2.5, "the start waited for a connect timeout")
        wait_until(lambda: os.path.exists(late), run_for + 8, "the command's second mark")
        # Three ttls later the lock is still ours on every healthy master: renewals kept it.
        values = self.values("k")
        self.assertTrue(all(values), values)
        self.assertEqual(len({v.split()[1] for v in values}), 1, values)
        _, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(err, "")
        self.assertEqual(self.values("k"), [None, None, None])

    def test_a_black_holed_first_master_costs_no_connect_timeout(self):
        hole, = self.black_holes(1)
        urls = ["--redis", hole.url, "--redis", self.servers[0].url,
                "--redis", self.servers[1].url]
        marker = os.path.join(self.tmp, "ran")
        begin = time.monotonic()
        r = run_rlock(["run"] + urls + ["--connect-timeout", "5s", "k", "--", "touch", marker],
                      env=env_without_url())
        # The whole run, the history written after the release included.
        self.assertLess(time.monotonic() - begin, 2.5, "a connect timeout was waited for")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(marker))
        self.assertEqual(self.values("k")[:2], [None, None])

    def test_a_slow_master_is_not_waited_for_and_still_gets_the_release(self):
        # The third master's replies come a second late (it acts on each command at once).
        proxy = DelayProxy(self.servers[2].port, 1.0)
        self.addCleanup(proxy.close)
        urls = ["--redis", self.servers[0].url, "--redis", self.servers[1].url,
                "--redis", proxy.url]
        marker = os.path.join(self.tmp, "ran")
        begin = time.monotonic()
        p = self.procs.start(["run"] + urls + ["k", "--", "sh", "-c", f"touch {marker}; sleep 1"])
        wait_until(lambda: os.path.exists(marker), 10, "the command to start")
        self.assertLess(time.monotonic() - begin, 0.8, "the start waited for the slow master")
        # Not waited for, it was still asked: it holds the lock too ...
        wait_until(lambda: self.servers[2].cmd("GET", "k"), 5, "the lock on the slow master")
        _, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 0, err)
        # ... and gets the release, whose reply rlock did not wait for either.
        wait_until(lambda: self.servers[2].cmd("GET", "k") is None, 5,
                   "the release on the slow master")
        self.assertEqual(self.values("k"), [None, None, None])

    def test_late_replies_are_never_taken_for_those_of_later_commands(self):
        # The second master's replies come 300 ms late: the acquire does not wait for them, and
        # they are still owed when the third master dies. From then on each renewal needs the
        # second master's reply to it, not one of those to the acquire.
        proxy = DelayProxy(self.servers[1].port, 0.3)
        self.addCleanup(proxy.close)
        urls = ["--redis", self.servers[0].url, "--redis", proxy.url,
                "--redis", self.servers[2].url]
        marker = os.path.join(self.tmp, "ran")
        # --ttl 6s: a renewal every 2 s, which may wait 1 s for its quorum (the first, 600 ms:
        # two late round trips, as the masters do not know the renew script yet).
        p = self.procs.start(["run"] + urls + ["--ttl", "6s", "k", "--", "sh", "-c",
                                               f"touch {marker}; sleep 5"])
        wait_until(lambda: os.path.exists(marker), 10, "the command to start")
        self.servers[2].kill()
        _, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(err, "", "a renewal failed")
        wait_until(lambda: self.values("k")[:2] == [None, None], 5, "the release on both")

    def test_wait_acquire_extend_release(self):
        holder = self.procs.start(["run"] + self.urls + ["k", "--", "sleep", "0.7"])
        wait_until(lambda: all(self.values("k")), 10, "the holder on all masters")
        waited = self.run_on_all(["run", "--wait", "10s", "k", "--", "true"])
        self.assertEqual(waited.returncode, 0, waited.stderr)
        self.assertEqual(holder.wait(timeout=10), 0)
        token = self.run_on_all(["acquire", "--ttl", "10s", "k"]).stdout.strip()
        self.assertTrue(all(v and token in v for v in self.values("k")))
        self.assertEqual(self.run_on_all(["extend", "--token", token, "--ttl", "20s", "k"])
                         .returncode, 0)
        self.assertTrue(all(s.cmd("PTTL", "k") > 10000 for s in self.servers))
        self.assertEqual(self.run_on_all(["release", "--token", token, "k"]).returncode, 0)
        self.assertEqual(self.values("k"), [None, None, None])

    def test_release_force_leaves_a_tombstone_on_every_master(self):
        holder = self.procs.start(["run"] + self.urls + ["--ttl", "30s", "k", "--", "sleep", "60"])
        wait_until(lambda: all(self.values("k")), 10, "the holder on all masters")
        r = self.run_on_all(["release", "--force", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(all(v.startswith("rlock/1 broken ") for v in self.values("k")))
        self.assertEqual(self.run_on_all(["run", "-n", "k", "--", "true"]).returncode, 75)
        self.assertEqual(holder.wait(timeout=30), 76)
        # Ended by the holder's rlock, which returns once a quorum answered: the last master
        # reads the release a moment later.
        wait_until(lambda: self.values("k") == [None, None, None], 5, "the tombstones ended")

    def hold_until_done(self, urls, ttl):
        """Starts `rlock run` on URLS that holds "k" until done() is called."""
        done = os.path.join(self.tmp, "done")
        holder = self.procs.start(["run"] + urls + ["--ttl", ttl, "k", "--", "sh", "-c",
                                                    f"while [ ! -e {done} ]; do sleep 0.05; done"])
        return holder, lambda: open(done, "w").close()

    def cut_the_third_and_end(self, holder, done):
        """Cuts the holder's connection to the third master, ends its command, and checks that
        rlock exits with no master left holding "k" (none waits for its ttl)."""
        self.servers[2].cmd("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        done()
        self.assertEqual(holder.wait(timeout=30), 0)
        self.assertEqual(self.values("k"), [None, None, None])

    def test_a_master_whose_connection_was_cut_still_gets_the_release(self):
        # The holder's connection to the third master closed while idle (a proxy's idle limit,
        # a server's `timeout`): the release connects to it anew, and a TLS handshake takes
        # longer than the quorum's answer. rlock exits only once the third has the release
        # too, so no master keeps the lock until its ttl.
        make_certificates(self.tmp)
        tls_port = free_port()
        self.servers[2].stop()
        self.servers[2] = tls_server(self.tmp, tls_port)
        urls = self.urls[:4] + ["--redis", f"rediss://127.0.0.1:{tls_port}",
                                "--cacert", os.path.join(self.tmp, "ca.crt")]
        # A run before loads the scripts on the masters: no NOSCRIPT round trip for the release.
        self.assertEqual(run_rlock(["run"] + urls + ["k", "--", "true"],
                                   env=env_without_url()).returncode, 0)
        # Renewed every 5 s: none between the cut and the release.
        holder, done = self.hold_until_done(urls, "15s")
        wait_until(lambda: all(self.values("k")), 15, "the holder on all masters")
        # Idle past k_idle_check_after (CLIENT LIST's idle counts clock seconds: 2 is at least
        # one whole): rlock finds the cut before its next command.
        def holder_idle():
            clients = self.servers[2].cmd("CLIENT", "LIST", "TYPE", "normal").splitlines()
            return any(" cmd=eval" in c and int(c.split(" idle=")[1].split()[0]) >= 2
                       for c in clients)
        wait_until(holder_idle, 10, "the holder's connection to the third master idle")
        self.cut_the_third_and_end(holder, done)

    def test_a_master_that_owed_a_reply_when_cut_still_gets_the_release(self):
        # The third master frozen through a renewal: the quorum renews without it, and its
        # reply is owed. Thawed, it answers, and its connection is cut at once, before the next
        # renewal: behind the owed reply the holder finds the close, and the release goes out
        # on a new connection.
        holder, done = self.hold_until_done(self.urls, "9s")
        wait_until(lambda: all(self.values("k")), 10, "the holder on all masters")
        pttl = lambda: self.servers[0].cmd("PTTL", "k")
        wait_until(lambda: pttl() > 8000, 10, "a renewal")
        self.servers[2].freeze()
        wait_until(lambda: pttl() < 7000, 10, "the lock's ttl to run down")
        wait_until(lambda: pttl() > 8000, 10, "a renewal without the third master")
        self.servers[2].thaw()
        wait_until(lambda: self.servers[2].cmd("PTTL", "k") > 8000, 10, "the owed renewal")
        self.cut_the_third_and_end(holder, done)

    def test_a_master_cut_just_after_a_renewal_still_gets_the_release(self):
        # Cut too soon after a reply for rlock to look for the close (k_idle_check_after): the
        # release goes out on the dead connection, fails there, and is sent again on a new one.
        holder, done = self.hold_until_done(self.urls, "3s")
        wait_until(lambda: all(self.values("k")), 10, "the holder on all masters")
        pttl = lambda: self.servers[2].cmd("PTTL", "k")
        wait_until(lambda: pttl() < 2500, 10, "the lock's ttl to run down")
        wait_until(lambda: pttl() > 2800, 10, "a renewal")
        self.cut_the_third_and_end(holder, done)

    def test_list_shows_a_lock_held_on_any_master_once(self):
        # "a" on every master, "b" on the second alone, "c" on the third alone: "a" is held,
        # "b" and "c" free by quorum, each said to be held on one node.
        self.assertEqual(self.run_on_all(["acquire", "--ttl", "60s", "a"]).returncode, 0)
        for i, key in ((1, "b"), (2, "c")):
            r = run_rlock(["acquire", "--redis", self.servers[i].url, "--ttl", "60s", key],
                          env=env_without_url())
            self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_on_all(["list"])
        self.assertEqual((r.returncode, [line.split()[0] for line in r.stdout.splitlines()]),
                         (0, ["a", "b", "c"]), r.stderr)
        doc = json.loads(self.run_on_all(["list", "--json"]).stdout)
        self.assertEqual([(l["key"], l["state"]) for l in doc["locks"]],
                         [("a", "held"), ("b", "free"), ("c", "free")])
        self.assertEqual([l["nodes"]["held_without_quorum"]["nodes"] for l in doc["locks"][1:]],
                         [1, 1])
        # The first master down: the others still tell.
        self.servers[0].kill()
        r = self.run_on_all(["list"])
        self.assertEqual((r.returncode, [line.split()[0] for line in r.stdout.splitlines()]),
                         (0, ["a", "b", "c"]), r.stderr)

    def test_what_redlock_cannot_do_is_refused_before_any_write(self):
        for flag in (["--limit", "3"], ["--fair"], ["--min-replicas", "1"], ["--once-per", "day"]):
            r = self.run_on_all(["run"] + flag + ["k", "--", "true"])
            self.assertEqual(r.returncode, 64, r.stderr)
            self.assertIn("Redlock", r.stderr)
        self.assertEqual([s.cmd("DBSIZE") for s in self.servers], [0, 0, 0])


class Sentinel(unittest.TestCase):
    """One primary, one replica, one sentinel; SENTINEL FAILOVER in the middle of a run."""

    @classmethod
    def setUpClass(cls):
        cls.primary = RedisServer()
        cls.replica = RedisServer()
        cls.replica.cmd("REPLICAOF", "127.0.0.1", str(cls.primary.port))
        wait_until(lambda: "master_link_status:up" in cls.replica.cmd("INFO", "replication"),
                   10, "the replica in sync")
        cls.dir = tempfile.mkdtemp(prefix="rlock-sentinel-")
        cls.port = free_port()
        conf = os.path.join(cls.dir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"port {cls.port}\nbind 127.0.0.1\ndir {cls.dir}\n"
                    f"sentinel monitor mymaster 127.0.0.1 {cls.primary.port} 1\n"
                    "sentinel down-after-milliseconds mymaster 1000\n"
                    "sentinel failover-timeout mymaster 10000\n")
        cls.sentinel = subprocess.Popen(
            [REDIS_SENTINEL or "redis-sentinel", conf],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: cls.replicas_known(), 20, "the sentinel to see the replica")
        cls.url = f"redis-sentinel://127.0.0.1:{cls.port}/mymaster"

    @classmethod
    def tearDownClass(cls):
        cls.sentinel.kill()
        cls.sentinel.wait()
        cls.primary.stop()
        cls.replica.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def ask(cls, *args):
        c = RedisClient(cls.port)
        try:
            return c(*args)
        finally:
            c.close()

    @classmethod
    def replicas_known(cls):
        """The sentinel has the replica's own INFO (not only the primary's word): only then can
        it promote it (else SENTINEL FAILOVER says NOGOODSLAVE)."""
        try:
            replicas = cls.ask("SENTINEL", "replicas", "mymaster")
        except OSError:
            return False
        if len(replicas) != 1:
            return False
        fields = dict(zip(replicas[0][::2], replicas[0][1::2]))
        return (fields.get("role-reported") == "slave" and
                fields.get("master-link-status") == "ok" and "disconnected" not in
                fields.get("flags", ""))

    def setUp(self):
        self.procs = Procs()
        self.tmp = tempfile.mkdtemp(prefix="rlock-sentinel-test-")

    def tearDown(self):
        self.procs.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def current(self):
        port = int(self.ask("SENTINEL", "get-master-addr-by-name", "mymaster")[1])
        return self.primary if port == self.primary.port else self.replica

    def test_run_through_sentinel_and_across_a_failover(self):
        before = self.current()
        r = run_rlock(["run", "--redis", self.url, "s:first", "--", "true"], env=env_without_url())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNotNone(before.cmd("GET", "{s:first}:rlock:fence"))

        # A run holds a lock while the sentinel fails over; a second one waits for the key.
        log, probe = os.path.join(self.tmp, "log"), os.path.join(self.tmp, "probe")
        os.mkdir(probe)
        section = [SECTION, log, probe, "1"]
        first = self.procs.start(["run", "--redis", self.url, "--ttl", "2s", "s:k", "--"] +
                                 section + ["4000"])
        wait_until(lambda: os.path.exists(log), 10, "the first holder inside")
        wait_until(lambda: "master_repl_offset" in before.cmd("INFO", "replication"), 5, "")
        def failover():
            try:
                return self.ask("SENTINEL", "failover", "mymaster") == "OK"
            except RespError as e:  # the sentinel not ready to pick the replica yet
                if "NOGOODSLAVE" in str(e):
                    return False
                raise
        wait_until(failover, 20, "the sentinel to start a failover")
        after = wait_until(lambda: self.current() is not before and self.current(), 30,
                           "the failover")
        wait_until(lambda: after.cmd("ROLE")[0] == "master", 20, "the new primary promoted")
        second = self.procs.start(["run", "--redis", self.url, "--wait", "20s", "s:k", "--"] +
                                  section + ["200"])
        # The first either kept its lease through the switch (0) or stopped its command (76).
        kept = first.wait(timeout=30)
        self.assertIn(kept, (0, 76), first.stderr.read())
        print(f"\n  across the failover the first holder {'kept its lease' if kept == 0 else 'stopped its command (76)'}")
        self.assertEqual(second.wait(timeout=30), 0, second.stderr.read())
        with open(log) as f:
            history = f.read()
        self.assertNotIn("overlap", history, "two holders at once across the failover")
        self.assertEqual(history.count("enter"), 2)

        r = run_rlock(["run", "--redis", self.url, "s:after", "--", "true"], env=env_without_url())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNotNone(after.cmd("GET", "{s:after}:rlock:fence"))

    def test_min_replicas(self):
        primary = self.current()
        r = run_rlock(["run", "--redis", self.url, "--min-replicas", "1", "m:k", "--", "true"],
                      env=env_without_url())
        self.assertEqual(r.returncode, 0, r.stderr)
        # Two replicas asked for, one exists: no run, exit 69, nothing left.
        marker = os.path.join(self.tmp, "ran")
        r = run_rlock(["run", "--redis", self.url, "--min-replicas", "2", "m:k", "--", "touch",
                       marker], env=env_without_url())
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("1 of the 2 replicas --min-replicas asks for", r.stderr)
        self.assertFalse(os.path.exists(marker))
        self.assertIsNone(primary.cmd("GET", "m:k"))

    def test_unknown_primary_name(self):
        url = f"redis-sentinel://127.0.0.1:{self.port}/nosuch"
        r = run_rlock(["run", "--redis", url, "k", "--", "true"], env=env_without_url())
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("no primary named 'nosuch'", r.stderr)


class Cluster(unittest.TestCase):
    """Three masters made with redis-cli --cluster create; every verb from one seed URL."""

    @classmethod
    def setUpClass(cls):
        cls.nodes = start_cluster("--cluster-node-timeout", "3000")
        cls.keys = key_per_master(cls.nodes)

    @classmethod
    def tearDownClass(cls):
        for n in cls.nodes:
            n.stop()

    @classmethod
    def owner(cls, key):
        return cluster_owner(cls.nodes, key)

    def setUp(self):
        self.procs = Procs()

    def tearDown(self):
        self.procs.close()

    def test_keys_on_every_master_from_one_seed(self):
        seed = self.nodes[0].url
        for key in list(self.keys.values()) + ["job:{c:42}:nightly"]:
            with self.subTest(key=key):
                r = run_rlock(["run", "--redis", seed, key, "--", "sh", "-c",
                               'test "$RLOCK_FENCE" -ge 1'], env=env_without_url())
                self.assertEqual(r.returncode, 0, r.stderr)
                fence = "{" + key + "}:rlock:fence" if "}" not in key else key + ":rlock{}:fence"
                self.assertIsNotNone(self.owner(key).cmd("GET", fence), f"{fence} not on owner")

    def test_status_list_and_wait_from_any_node(self):
        keys = list(self.keys.values())
        for key in keys:
            self.procs.start(["run", "--redis", self.nodes[0].url, "--ttl", "5s", key, "--",
                              "sleep", "30"])
        wait_until(lambda: all(self.owner(k).cmd("GET", k) for k in keys), 10, "three holders")
        for node in self.nodes:
            status = run_rlock(["status", "--redis", node.url] + keys, env=env_without_url())
            self.assertEqual(status.returncode, 0, status.stdout + status.stderr)
            self.assertEqual(status.stdout.count(" held "), 3, status.stdout)
            listed = run_rlock(["list", "--redis", node.url, "c:*"], env=env_without_url())
            self.assertEqual(listed.returncode, 0, listed.stderr)
            for key in keys:
                self.assertIn(key, listed.stdout)
        # A waiter on another node's key is woken there (BLPOP routed to the key's master).
        for p in self.procs.procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs.procs:
            p.wait(timeout=10)
        self.assertFalse(any(self.owner(k).cmd("GET", k) for k in keys), "released on SIGTERM")
        holder = self.procs.start(["run", "--redis", self.nodes[1].url, keys[2], "--", "sleep",
                                   "0.5"])
        wait_until(lambda: self.owner(keys[2]).cmd("GET", keys[2]), 10, "the holder")
        r = run_rlock(["run", "--redis", self.nodes[0].url, "--wait", "10s", keys[2], "--",
                       "true"], env=env_without_url())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(holder.wait(timeout=10), 0)

    def test_list_sorts_the_locks_of_every_master_together(self):
        seed = self.nodes[0].url
        keys = [f"s:{i}" for i in range(30)]
        self.assertEqual(len({self.owner(k).port for k in keys}), 3)  # on every master
        try:
            for key in keys:
                r = run_rlock(["acquire", "--redis", seed, "--ttl", "60s", key],
                              env=env_without_url())
                self.assertEqual(r.returncode, 0, r.stderr)
            r = run_rlock(["list", "--redis", self.nodes[1].url, "s:*"], env=env_without_url())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual([line.split()[0] for line in r.stdout.splitlines()], sorted(keys))
            r = run_rlock(["list", "--json", "--redis", seed, "s:*"], env=env_without_url())
            self.assertEqual([l["key"] for l in json.loads(r.stdout)["locks"]], sorted(keys))
        finally:
            for key in keys:
                run_rlock(["release", "--redis", seed, "--force", "--now", key],
                          env=env_without_url())

    def test_list_finds_every_master_where_info_is_refused(self):
        """A user denied INFO (as a server with INFO renamed away refuses it): CLUSTER SLOTS
        says it is a Cluster, and list scans every master, not the seed alone."""
        seed = self.nodes[0].url
        keys = sorted(self.keys.values())
        try:
            for n in self.nodes:
                n.cmd("ACL", "SETUSER", "default", "-info")
            for key in keys:
                r = run_rlock(["acquire", "--redis", seed, "--ttl", "60s", key],
                              env=env_without_url())
                self.assertEqual(r.returncode, 0, r.stderr)
            r = run_rlock(["list", "--redis", seed, "c:*"], env=env_without_url())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual([line.split()[0] for line in r.stdout.splitlines()], keys)
        finally:
            for n in self.nodes:
                n.cmd("ACL", "SETUSER", "default", "+info")
            for key in keys:
                run_rlock(["release", "--redis", seed, "--force", "--now", key],
                          env=env_without_url())

    def test_shared_holders_and_an_exclusive_waiter_on_another_nodes_key(self):
        # A key whose slot is not the seed's: every key of the shared lock on its owner (one
        # script touches the lock key, its places and its queue), waiters served in order.
        seed = self.nodes[0].url
        key = next(k for port, k in self.keys.items() if port != self.nodes[0].port)
        owner = self.owner(key)
        tokens = [run_rlock(["acquire", "--redis", seed, "--shared", "--ttl", "30s", key],
                            env=env_without_url()).stdout.strip() for _ in range(2)]
        self.assertEqual(owner.cmd("ZCARD", "{%s}:rlock:shared" % key), 2)
        status = run_rlock(["status", "--redis", self.nodes[2].url, key], env=env_without_url())
        self.assertIn("held  shared by 2 holders: ", status.stdout, status.stderr)
        self.assertEqual(run_rlock(["acquire", "--redis", seed, key],
                                   env=env_without_url()).returncode, 75)
        log = os.path.join(tempfile.mkdtemp(prefix="rlock-cluster-"), "order")
        alone = self.procs.start(["run", "--redis", seed, "-w", "30s", key, "--", "sh", "-c",
                                  f"echo alone >> {log}"])
        wait_until(lambda: owner.cmd("ZCARD", "{%s}:rlock:queue" % key) == 1, 10, "it to queue")
        shared = self.procs.start(["run", "--redis", seed, "--shared", "-w", "30s", key, "--",
                                   "sh", "-c", f"echo shared >> {log}"])
        wait_until(lambda: owner.cmd("ZCARD", "{%s}:rlock:queue" % key) == 2, 10, "behind it")
        for t in tokens:
            r = run_rlock(["release", "--redis", seed, key, "--token", t], env=env_without_url())
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(alone.wait(timeout=30), 0)
        self.assertEqual(shared.wait(timeout=30), 0)
        with open(log) as f:
            self.assertEqual(f.read().split(), ["alone", "shared"])
        shutil.rmtree(os.path.dirname(log))


def errors_counted(node, code):
    """How many error replies of CODE (TRYAGAIN, CLUSTERDOWN ...) NODE has given."""
    for line in node.cmd("INFO", "errorstats").splitlines():
        if line.startswith(f"errorstat_{code}:count="):
            return int(line.split("=", 1)[1])
    return 0


class ClusterResharding(unittest.TestCase):
    """What a Cluster refuses for a while: a lock's slot migrated back and forth as
    redis-cli --cluster reshard moves it (TRYAGAIN, ASK, MOVED), a slot no master serves
    (CLUSTERDOWN), a master restarted loading its data (LOADING). Each is waited out within the
    command timeout: never exit 69, never a lock taken twice or lost."""

    @classmethod
    def setUpClass(cls):
        # A long node timeout: a master restarted loading its data is not failed by the others.
        cls.nodes = start_cluster("--cluster-node-timeout", "15000")

    @classmethod
    def tearDownClass(cls):
        for n in cls.nodes:
            n.stop()

    def setUp(self):
        self.procs = Procs()
        self.tmp = tempfile.mkdtemp(prefix="rlock-reshard-")

    def tearDown(self):
        self.procs.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fill(self, node, tag, count):
        """COUNT keys of TAG's slot on NODE, so that moving the slot or loading it takes a while."""
        c = node.client()
        try:
            for i in range(0, count, 500):
                pairs = []
                for j in range(i, min(i + 500, count)):
                    pairs += ["{%s}:fill:%d" % (tag, j), "x"]
                c("MSET", *pairs)
        finally:
            c.close()

    def test_runs_a_holder_and_operators_through_live_migrations_of_the_lock_slot(self):
        tag = "reshard"
        held, free = f"job:{{{tag}}}:held", f"job:{{{tag}}}:free"
        slot = self.nodes[0].cmd("CLUSTER", "KEYSLOT", tag)
        home = cluster_owner(self.nodes, held)
        away = next(n for n in self.nodes if n is not home)
        self.fill(home, tag, 3000)  # a migration of about 100 ms: 150 MIGRATEs of 20 keys
        seed = self.nodes[0].url
        log, probe, stop = (os.path.join(self.tmp, name) for name in ("log", "probe", "stop"))
        os.mkdir(probe)
        section = [SECTION, log, probe, "1", "0"]
        first = run_rlock(["run", "--redis", seed, free, "--"] + section, env=env_without_url())
        self.assertEqual(first.returncode, 0, first.stderr)  # a run in its history, for check
        holder = self.procs.start(["run", "--redis", seed, "--ttl", "3s", held, "--", "sh", "-c",
                                   f"while [ ! -e {stop} ]; do sleep 0.05; done"])
        value = wait_until(lambda: home.cmd("GET", held), 10, "the holder")

        windows, tries, failures = [], [], []
        done = threading.Event()

        def mover():
            a, b = home, away
            try:
                while not done.is_set():
                    windows.append(migrate_slot(self.nodes, slot, a, b))
                    a, b = b, a
                    # The slot stable until a few more tries have ended, as between the slots
                    # of a reshard, then on the move again.
                    seen = len(tries)
                    wait_until(lambda: done.is_set() or len(tries) >= seen + 6, 60,
                               "tries between two migrations")
            except Exception as e:  # reported by the test, from its own thread
                failures.append(f"migration: {e!r}")

        def trier(name, commands, count):
            try:
                for i in range(count):
                    args = commands[i % len(commands)]
                    start = time.monotonic()
                    r = run_rlock(["--redis", seed] + args, env=env_without_url())
                    tries.append((start, time.monotonic(), name, args, r))
            except Exception as e:  # reported by the test
                failures.append(f"{name}: {e!r}")

        runners = [threading.Thread(target=mover)] + [
            threading.Thread(target=trier, args=a) for a in (
                ("free", [["run", "-n", free, "--"] + section], 100),
                ("free", [["run", "-n", free, "--"] + section], 100),
                ("held", [["run", "-n", held, "--", "true"]], 50),
                ("operator", [["status", held], ["inspect", held], ["list", f"job:{{{tag}}}:*"],
                              ["history", free], ["check", "--every", "1h", free]], 50))]
        for t in runners:
            t.start()
        for t in runners[1:]:
            t.join(timeout=300)
        done.set()
        runners[0].join(timeout=60)
        self.assertEqual(failures, [])

        exits = {}
        for start, end, name, args, r in tries:
            exits.setdefault(name, {}).setdefault(r.returncode, 0)
            exits[name][r.returncode] += 1
            allowed = {"free": (0, 75), "held": (75,), "operator": (0,)}[name]
            self.assertIn(r.returncode, allowed, f"{args}: {r.stdout}{r.stderr}")
            migrating = any(start < w_end and end > w_start for w_start, w_end in windows)
            # list SCANs one master after another: a key that moves between two of them
            # mid-scan can be on neither when each is scanned (status and inspect go by key).
            if args[0] in ("status", "inspect") or (args[0] == "list" and not migrating):
                self.assertIn(held, r.stdout, r.stderr)
        during = sum(1 for start, end, *_ in tries
                     if any(start < w_end and end > w_start for w_start, w_end in windows))
        print(f"\n  {len(tries)} tries, {during} while the lock's slot was migrating "
              f"({len(windows)} migrations): exits {exits}")
        self.assertGreaterEqual(len(windows), 10, "too few migrations to tell")
        self.assertGreaterEqual(during, 50, "too few tries during a migration to tell")
        with open(log) as f:
            self.assertNotIn("overlap", f.read())
        # The holder kept its lock throughout: the same value (token, fence), where it is now.
        self.assertEqual(cluster_owner(self.nodes, held).cmd("GET", held), value)
        with open(stop, "w"):
            pass
        self.assertEqual(holder.wait(timeout=30), 0, holder.stderr.read())

    def test_a_slot_that_no_master_serves_for_a_while_is_waited_out(self):
        key = next(f"c:{i}" for i in range(1000)
                   if cluster_owner(self.nodes, f"c:{i}") is not self.nodes[0])
        owner = cluster_owner(self.nodes, key)
        slot = owner.cmd("CLUSTER", "KEYSLOT", key)
        owner.cmd("CLUSTER", "DELSLOTS", slot)
        try:
            wait_until(lambda: "cluster_state:fail" in owner.cmd("CLUSTER", "INFO"), 10,
                       "the master to say the cluster is down")
            refused = errors_counted(owner, "CLUSTERDOWN")
            p = self.procs.start(["run", "--redis", self.nodes[0].url, "--command-timeout", "20s",
                                  "-n", key, "--", "true"])
            wait_until(lambda: p.poll() is not None or
                       errors_counted(owner, "CLUSTERDOWN") >= refused + 2, 10,
                       "rlock refused twice")
        finally:
            owner.cmd("CLUSTER", "ADDSLOTS", slot)
        self.assertEqual(p.wait(timeout=30), 0, p.stderr.read())

    def test_a_master_loading_its_data_after_a_restart_is_waited_for(self):
        key = "job:{loading}:x"
        owner = cluster_owner(self.nodes, key)
        self.fill(owner, "loading", 10000)
        owner.cmd("SAVE")
        owner.kill()
        slow = ["--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024"]
        owner.extra_args += slow  # about 1 s of loading: 100 us a key

        started = []

        def start():
            try:
                owner.start(port=owner.port)  # returns once it answers PING: loaded
                started.append(True)
            except Exception as e:  # reported by the test
                started.append(e)

        def loading():
            try:
                c = RedisClient(owner.port, timeout=0.5)
            except OSError:
                return False  # not listening yet
            try:
                c("PING")
                raise AssertionError("loaded before it was looked at")
            except RespError as e:
                return str(e).startswith("LOADING")
            finally:
                c.close()

        restarting = threading.Thread(target=start)
        restarting.start()
        try:
            wait_until(loading, 10, "the master to be loading its data")
            # While it loads, a master says CLUSTERDOWN to a command with a key (its cluster
            # state is not ok yet), LOADING to one without (list's SCAN).
            run = self.procs.start(["run", "--redis", self.nodes[0].url, "--command-timeout",
                                    "20s", "-n", key, "--", "true"])
            listed = self.procs.start(["list", "--redis", self.nodes[0].url, "--command-timeout",
                                       "20s", "job:*"])
            self.assertEqual(run.wait(timeout=30), 0, run.stderr.read())
            self.assertEqual(listed.wait(timeout=30), 0, listed.stderr.read())
        finally:
            restarting.join(timeout=30)
            del owner.extra_args[-len(slow):]
        self.assertEqual(started, [True])
        owner.cmd("CONFIG", "SET", "key-load-delay", "0")


if __name__ == "__main__":
    unittest.main()
