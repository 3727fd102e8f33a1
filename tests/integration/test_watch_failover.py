"""rlock watch follows the lock's server through a failover (man rlock, "watch"): behind
Sentinel it leaves the old primary for the new one without a word, and in a Cluster it finds
the replica promoted after the slot's master was killed, and goes on telling what happens to
the lock there, by keyspace notifications from the server that now has it."""
import os
import unittest

from harness import (cluster_owner, rlock_env, run_rlock, start_cluster, start_rlock, stop_procs,
                     wait_until)
from test_failover import Topology
from test_watch import JsonLines

KEY = "lock:watched"


def role(server):
    try:
        return server.cmd("ROLE")[0]
    except OSError:
        return None


@unittest.skipIf(os.environ.get("RLOCK_SANITIZE"),
                 "a long scenario (a failover each): run once, in the plain build")
class WatchThroughFailover(unittest.TestCase):

    def setUp(self):
        self.procs = []
        self.addCleanup(stop_procs, self.procs)

    def watch(self, env):
        proc = start_rlock(["watch", "--json", KEY], env=env)
        self.procs.append(proc)
        lines = JsonLines(proc)
        self.assertEqual(lines.next()["mode"], "notifications")
        lines.next()  # the lock as it is at the start
        return lines

    def taken_and_released(self, lines, env, server, *options):
        """SERVER holds the lock now: the watch, once it saw it taken, subscribes there."""
        # --wait: the sentinels may still say a failover is in progress.
        r = run_rlock(["acquire", "--ttl", "30s", "--wait", "30s", *options, KEY], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.strip()
        seen = lines.event("taken", timeout=20)
        self.assertEqual(seen[-1]["token"], token)
        channel = "__keyspace@0__:" + KEY
        wait_until(lambda: server().cmd("PUBSUB", "NUMSUB", channel)[1] > 0, 20,
                   "the watch to subscribe where the lock is")
        wait_until(lambda: run_rlock(["release", KEY, "--token", token], env=env).returncode == 0,
                   30, "the release (the sentinels may still say a failover is in progress)")
        seen += lines.event("released", timeout=20)
        # Heard from the server that has the lock now, not read there at the next look.
        self.assertEqual(seen[-1]["evidence"], "notification", seen)
        return seen

    def test_sentinel_the_new_primary_without_a_word(self):
        # The old primary refuses to be made a replica (its REPLICAOF renamed away, which the
        # sentinels are not told): it stays a primary that answers, as one does for seconds
        # after the sentinels name another, until they reconfigure it and close its clients.
        top = Topology(primary_args=("--rename-command", "REPLICAOF", "",
                                     "--rename-command", "SLAVEOF", ""))
        self.addCleanup(top.close)
        for s in top.servers:
            s.cmd("CONFIG", "SET", "notify-keyspace-events", "KEA")
        env = rlock_env(RLOCK_REDIS_URL=top.url)
        lines = self.watch(env)
        old = top.servers[0]
        top.fail_over()
        wait_until(lambda: all(top.primary_port(i) != old.port for i in range(3)), 30,
                   "every sentinel to name the new primary")
        self.assertEqual(role(old), "master")
        seen = self.taken_and_released(
            lines, env, lambda: next(s for s in top.servers if s.port == top.primary_port()),
            "--min-replicas", "0")
        self.assertNotIn("unreachable", [e["event"] for e in seen])

    def test_cluster_the_replica_promoted_after_the_master_was_killed(self):
        nodes = start_cluster("--cluster-node-timeout", "2000", "--notify-keyspace-events",
                              "KEA", replicas=1)
        self.addCleanup(lambda: [n.stop() for n in nodes])
        master = cluster_owner(nodes, KEY)
        others = [n for n in nodes[:3] if n is not master]
        seeds = ",".join(f"127.0.0.1:{n.port}" for n in [master] + others)
        env = rlock_env(RLOCK_REDIS_URL="redis://" + seeds)
        lines = self.watch(env)
        master.kill()
        lines.event("unreachable", timeout=20)
        slot = others[0].cmd("CLUSTER", "KEYSLOT", KEY)

        def owner_port(node):
            return next(m[1] for start, end, m, *_ in node.cmd("CLUSTER", "SLOTS")
                        if start <= slot <= end)
        wait_until(lambda: all(owner_port(n) != master.port for n in nodes if n is not master),
                   30, "every node to know the replica's promotion")
        seen = self.taken_and_released(lines, env, lambda: next(
            n for n in nodes if n is not master and n.port == owner_port(others[0])))
        self.assertIn("reachable", [e["event"] for e in seen])


if __name__ == "__main__":
    unittest.main()
