"""A Redis Cluster whose master dies (kill -9) or stops answering (SIGSTOP): rlock finds the
promoted replica through the nodes it knows (docs/DESIGN.md "Cluster failover"), a holder
keeps its lock, a waiter and -n runs reach the new master, and nothing runs twice."""
import json
import os
import re
import shutil
import tempfile
import time
import unittest

from harness import (RLOCK, RedisServer, cluster_owner, rlock_env, run_rlock, start_cluster, start_rlock,
                     stop_procs, wait_until)

KEY = "lock:nightly"


def role(node):
    try:
        return node.cmd("ROLE")[0]
    except OSError:
        return None


def get_on(node, key):
    """KEY as NODE has it, a replica too (READONLY)."""
    c = node.client()
    try:
        c("READONLY")
        return c("GET", key)
    finally:
        c.close()


def replica_of(nodes, master):
    """The node of NODES that replicates MASTER."""
    for n in nodes:
        info = n.cmd("INFO", "replication")
        if "role:slave" in info and f"master_port:{master.port}\r\n" in info:
            return n
    raise AssertionError(f"no replica of {master.port}")


@unittest.skipIf(os.environ.get("RLOCK_SANITIZE") == "address",
                 "a long scenario: run in the plain build, and under TSan for the renewal thread")
class ClusterMasterKilled(unittest.TestCase):
    """Three masters, three replicas in sync, cluster-node-timeout 2000: the lock's master is
    killed with kill -9, or stopped, under a holder."""

    def setUp(self):
        self.nodes = start_cluster("--cluster-node-timeout", "2000", replicas=1)
        self.addCleanup(lambda: [n.stop() for n in self.nodes])
        self.dir = tempfile.mkdtemp(prefix="rlock-failover-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.procs = []
        self.addCleanup(stop_procs, self.procs)
        self.master = cluster_owner(self.nodes, KEY)
        self.replica = replica_of(self.nodes, self.master)
        self.others = [n for n in self.nodes[:3] if n is not self.master]

    def path(self, name):
        return os.path.join(self.dir, name)

    def start(self, args, log):
        with open(self.path(log + ".out"), "w") as out, open(self.path(log + ".err"), "w") as err:
            p = start_rlock(args, env=rlock_env(), stdout=out, stderr=err)
        self.procs.append(p)
        return p

    def read(self, name):
        with open(self.path(name)) as f:
            return f.read()

    def renewals(self, log):
        text = self.read(log + ".err")
        return text.count("renewed") + text.count("renewal recovered")

    def test_the_holder_keeps_its_lock_on_the_promoted_replica(self):
        self.holder_keeps_its_lock(self.master.kill, status_through_the_dead_seed=True)

    def test_a_master_that_stops_answering_is_followed_too(self):
        # SIGSTOP: connections are still accepted (the kernel's backlog), commands time out,
        # each taking its whole deadline, as with a host that dropped off the network. The
        # first seed names that master by another name than the map's (localhost, 127.0.0.1):
        # asked for the map first, it would take every deadline (the map's nodes come first).
        self.holder_keeps_its_lock(self.master.freeze, status_through_the_dead_seed=False,
                                   first_seed_host="localhost")

    def holder_keeps_its_lock(self, end_master, status_through_the_dead_seed,
                              first_seed_host="127.0.0.1"):
        go = self.path("go")
        # The holder's first seed is the master that dies: it sends no MOVED, so the map comes
        # from the other seed when that master is gone.
        seeds = f"redis://{first_seed_host}:{self.master.port},127.0.0.1:{self.others[0].port}"
        holder = self.start(
            ["-v", "--redis", seeds, "run", "--ttl", "15s", KEY, "--", "sh", "-c",
             f"touch {self.path('started')}; while [ ! -e {go} ]; do sleep 0.05; done; "
             f"touch {self.path('holder-done')}"], "holder")
        wait_until(lambda: os.path.exists(self.path("started")), 20, "the holder's command")
        value = self.master.cmd("GET", KEY)
        wait_until(lambda: self.renewals("holder") >= 1, 20, "the holder's first renewal")
        wait_until(lambda: get_on(self.replica, KEY) == value, 10, "the key on the replica")

        end_master()
        # A waiter started after the kill, whose first seed is the dead master.
        waiter = self.start(
            ["--redis", seeds, "run", "-w", "40s", KEY, "--", "sh", "-c",
             f"test -e {self.path('holder-done')} && touch {self.path('waiter-ok')}"], "waiter")
        wait_until(lambda: role(self.replica) == "master", 30, "the replica's promotion")
        promoted = time.monotonic()
        self.assertEqual(self.replica.cmd("GET", KEY), value)
        # The holder renews on the new master, well before its lease would run out.
        before = self.renewals("holder")
        wait_until(lambda: self.renewals("holder") > before, 10,
                   "a renewal on the promoted replica")
        print(f"promotion to renewal: {time.monotonic() - promoted:.2f} s")
        self.assertIsNone(holder.poll(), self.read("holder.err"))
        self.assertGreater(self.replica.cmd("PTTL", KEY), 10000)
        # Meanwhile a -n run from any node finds the lock held.
        busy = run_rlock(["--redis", self.others[1].url, "run", "-n", KEY, "--", "true"],
                         env=rlock_env())
        self.assertEqual(busy.returncode, 75, busy.stderr)
        # And the operator's view (through the dead master first, when it refuses at once):
        # the holder, on its host.
        status = run_rlock(["--redis", seeds if status_through_the_dead_seed else
                            self.others[0].url, "status", KEY], env=rlock_env())
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertRegex(status.stdout, rf"held +by {os.uname().nodename} pid {holder.pid} ")
        self.assertIsNone(waiter.poll(), self.read("waiter.err"))

        with open(go, "w"):
            pass
        self.assertEqual(holder.wait(timeout=20), 0, self.read("holder.err"))
        self.assertEqual(waiter.wait(timeout=40), 0, self.read("waiter.err"))
        self.assertTrue(os.path.exists(self.path("waiter-ok")), "the waiter ran before the end")
        self.assertIsNone(self.replica.cmd("GET", KEY))
        history = run_rlock(["--redis", self.others[0].url, "history", "--json", KEY],
                            env=rlock_env())
        runs = json.loads(history.stdout)["runs"]
        self.assertEqual([r["exit_status"] for r in runs], [0, 0], history.stdout)


class SeedsOfOneClusterAndASingleServer(unittest.TestCase):
    """A single server beside a Cluster's node in one URL: refused at every call of a process,
    even once the Cluster's node has given the map."""

    def setUp(self):
        self.nodes = start_cluster()
        self.addCleanup(lambda: [n.stop() for n in self.nodes])
        self.single = RedisServer()
        self.addCleanup(self.single.stop)

    def test_the_single_server_is_refused_and_nothing_is_written(self):
        seeds = f"redis://127.0.0.1:{self.single.port},127.0.0.1:{self.nodes[0].port}"
        # --once-per: a first call (the look at the period) whose failure the run goes past,
        # then the lock's try, in one process.
        r = run_rlock(["--redis", seeds, "run", "--once-per", "hour", KEY, "--", "true"],
                      env=rlock_env())
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn(f"127.0.0.1:{self.single.port}, an address of the URL, is no Cluster node",
                      r.stderr)
        for server in [self.single, *self.nodes]:
            self.assertEqual(server.cmd("DBSIZE"), 0)

    def test_seeds_that_refuse_cluster_slots_are_followed_by_moved(self):
        # An ACL without CLUSTER (docs/REDIS.md "Least privilege" asks it for list only): no map
        # before the first command, so MOVED teaches it, as with one seed.
        for n in self.nodes:
            n.cmd("ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-cluster")
        seeds = f"redis://app:pw@127.0.0.1:{self.nodes[0].port},127.0.0.1:{self.nodes[1].port}"
        for key in ("lock:a", "lock:b", "lock:c"):
            r = run_rlock(["--redis", seeds, "run", key, "--", "true"], env=rlock_env())
            self.assertEqual(r.returncode, 0, r.stderr)
            owner = cluster_owner(self.nodes, key)
            self.assertEqual(owner.cmd("EXISTS", "{%s}:rlock:history" % key), 1)


class SeedsOfNoCluster(unittest.TestCase):
    """Several addresses in one URL are one Cluster's seeds: two single servers never stand in
    for each other, since two hosts could then lock in two places."""

    def setUp(self):
        self.down, self.up = RedisServer(), RedisServer()
        self.addCleanup(self.down.stop)
        self.addCleanup(self.up.stop)
        self.down.kill()

    def test_a_single_server_never_stands_in_for_a_dead_seed(self):
        seeds = f"redis://127.0.0.1:{self.down.port},127.0.0.1:{self.up.port}"
        r = run_rlock(["--redis", seeds, "run", "-n", "k", "--", "true"], env=rlock_env())
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn(f"127.0.0.1:{self.up.port}, another address of the URL, is no Cluster "
                      "node", r.stderr)
        self.assertEqual(self.up.cmd("DBSIZE"), 0)

    def test_a_single_server_among_seeds_is_refused_while_it_answers(self):
        # Else it would stand in for the Cluster on the hosts that reach it, while those that
        # do not lock in the Cluster.
        seeds = f"redis://127.0.0.1:{self.up.port},127.0.0.1:{self.down.port}"
        for verb in (["run", "-n", "k", "--", "true"], ["status", "k"]):
            with self.subTest(verb=verb[0]):
                r = run_rlock(["--redis", seeds, *verb], env=rlock_env())
                self.assertEqual(r.returncode, 69, r.stderr)
                self.assertIn(f"127.0.0.1:{self.up.port}, an address of the URL, is no Cluster "
                              "node", r.stderr)
                self.assertEqual(self.up.cmd("DBSIZE"), 0)

    def test_the_failure_names_every_seed_tried(self):
        dead = [RedisServer() for _ in range(2)]
        for d in dead:
            self.addCleanup(d.stop)
            d.kill()
        seeds = ",".join(f"127.0.0.1:{s.port}" for s in [self.down, *dead])
        r = run_rlock(["--redis", f"redis://{seeds}", "run", "-n", "k", "--", "true"],
                      env=rlock_env())
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        for s in [self.down, *dead]:
            self.assertIn(f"127.0.0.1:{s.port}", r.stderr)

    def test_seeds_are_not_one_of_several_redlock_nodes(self):
        r = run_rlock(["--redis", f"redis://:secret@127.0.0.1:{self.up.port},127.0.0.1:1",
                       "--redis", self.up.url, "run", "k", "--", "true"], env=rlock_env())
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("cannot be one of several Redlock nodes", r.stderr)
        self.assertNotIn("secret", r.stderr)
        self.assertEqual(self.up.cmd("DBSIZE"), 0)


if __name__ == "__main__":
    unittest.main()
