"""A host name is resolved again for each new connection: ElastiCache's primary endpoint and
names like it move to the promoted replica at a failover. rlock runs in a mount namespace of
its own whose /etc/hosts (a file of the test's, bound over the machine's, which is not touched)
names the primary; mid-run the replica is promoted, the name moved to it and the old primary
shut down. The job runs on: its renewals reach the new primary."""
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import REDIS_SERVER, RLOCK, RedisClient, free_port, rlock_env, wait_until

NAME = "redis-primary.rlock-test"


class Server:
    """A redis-server on IP:PORT (the loopback range: 127.0.0.2, 127.0.0.3 ...)."""

    def __init__(self, ip, port, *args):
        self.ip, self.port = ip, port
        self.dir = tempfile.mkdtemp(prefix="rlock-dns-")
        self.proc = subprocess.Popen([REDIS_SERVER, "--bind", ip, "--port", str(port),
                                      "--save", "", "--appendonly", "no", "--dir", self.dir,
                                      "--protected-mode", "no", "--loglevel", "warning"] +
                                     list(args),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.pings, 10, f"redis-server on {ip}:{port}")

    def cmd(self, *args):
        return RedisClient.once((self.ip, self.port), *args)

    def pings(self):
        try:
            return self.cmd("PING") == "PONG"
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class MovingName(unittest.TestCase):
    def setUp(self):
        self.assertIsNotNone(shutil.which("unshare"), "unshare(1) (util-linux) is needed")
        self.tmp = tempfile.mkdtemp(prefix="rlock-dns-test-")
        port = free_port()
        self.primary = Server("127.0.0.2", port)
        self.replica = Server("127.0.0.3", port, "--replicaof", "127.0.0.2", str(port))
        wait_until(lambda: "master_link_status:up" in self.replica.cmd("INFO", "replication"),
                   10, "the replica in sync")
        self.hosts = os.path.join(self.tmp, "hosts")
        self.point_name_at("127.0.0.2")
        self.url = f"redis://{NAME}:{port}"

    def tearDown(self):
        self.primary.stop()
        self.replica.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def point_name_at(self, ip):
        # In place: the namespace's /etc/hosts is this very file (a bind mount of its inode).
        mode = "r+" if os.path.exists(self.hosts) else "w"
        with open(self.hosts, mode) as f:
            f.seek(0)
            f.truncate()
            f.write(f"127.0.0.1 localhost\n{ip} {NAME}\n")

    def rlock_in_namespace(self, args, **kw):
        script = f'mount --bind {self.hosts} /etc/hosts && exec "$@"'
        return subprocess.Popen(["unshare", "--mount", "sh", "-c", script, "sh", RLOCK] + args,
                                env=rlock_env(), start_new_session=True, text=True, **kw)

    def test_the_job_follows_its_redis_name_to_the_promoted_replica(self):
        started = os.path.join(self.tmp, "started")
        p = self.rlock_in_namespace(["--redis", self.url, "run", "--min-replicas", "0", "--ttl",
                                     "2s", "k", "--", "sh", "-c", f"touch {started}; sleep 5"],
                                    stderr=subprocess.PIPE)
        try:
            wait_until(lambda: os.path.exists(started), 10, "the job to start")
            wait_until(lambda: self.replica.cmd("GET", "k"), 10, "the lock on the replica")
            self.replica.cmd("REPLICAOF", "NO", "ONE")
            self.point_name_at("127.0.0.3")
            self.primary.stop()
            status = p.wait(timeout=30)
            err = p.stderr.read()
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()
        self.assertEqual(status, 0, err)
        runs = self.replica.cmd("XRANGE", "{k}:rlock:history", "-", "+")
        self.assertEqual(len(runs), 1)
        fields = dict(zip(runs[0][1][::2], runs[0][1][1::2]))
        self.assertEqual((fields["end"], fields["status"]), ("exited", "0"))
        self.assertIsNone(self.replica.cmd("GET", "k"), "the lock was not released there")


if __name__ == "__main__":
    unittest.main()
