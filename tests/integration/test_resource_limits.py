"""Starved of resources (descriptors, processes, a writable stdout, a metrics path), rlock fails
with one clean line and a documented status, and never leaves its lock behind."""
import os
import resource
import subprocess
import unittest

from harness import RLOCK, RedisTestCase, rlock_env, wait_until

NOBODY = 65534
# A sanitizer's runtime needs descriptors and threads of its own (LeakSanitizer stops the world
# with a thread at exit): under it, these limits test the runtime, not rlock.
SANITIZED = unittest.skipIf(os.environ.get("RLOCK_SANITIZE"),
                            "descriptor and process limits starve the sanitizer runtime")


def limited(kind, n, uid=None):
    def before_exec():
        resource.setrlimit(kind, (n, n))
        if uid is not None:  # RLIMIT_NPROC does not bind root
            os.setgid(uid)
            os.setuid(uid)
    return before_exec


def processes_of(uid):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                if any(l.startswith("Uid:") and int(l.split()[1]) == uid for l in f):
                    found.append(int(pid))
        except OSError:
            pass
    return found


class ResourceLimits(RedisTestCase):
    def run_limited(self, args, before_exec, **kw):
        return subprocess.run([RLOCK] + args, env=rlock_env(self.server), capture_output=True,
                              text=True, timeout=30, preexec_fn=before_exec, **kw)

    def assert_clean(self, r, allowed):
        self.assertIn(r.returncode, allowed, r.stderr)
        self.assertNotIn("terminate called", r.stderr)
        if r.returncode not in (0,):
            errors = [l for l in r.stderr.splitlines() if l.startswith("rlock: error: ")]
            self.assertTrue(errors, f"no error line: {r.stderr!r}")
        # Released, not left to expire: the ttl is the 30 s default.
        self.assert_no_lock("k")

    @SANITIZED
    def test_few_descriptors(self):
        # Below 4 the dynamic loader itself cannot open libhiredis; from 8 on rlock has enough.
        for n in range(4, 10):
            with self.subTest(nofile=n):
                r = self.run_limited(["run", "k", "--", "true"],
                                     limited(resource.RLIMIT_NOFILE, n))
                self.assert_clean(r, {0, 69, 125})
                if r.returncode != 0:
                    self.assertIn("Too many open files", r.stderr)

    @SANITIZED
    @unittest.skipUnless(os.geteuid() == 0, "RLIMIT_NPROC binds only a user that is not root")
    def test_no_processes_or_threads_left(self):
        # nobody may run 0..4 processes: no guardian, no child, no renewal thread, then enough.
        # The renewal thread starts after ttl/6; the command outlives that.
        for n in range(0, 5):
            with self.subTest(nproc=n):
                # The last run's guardian may still be exiting, and would count.
                wait_until(lambda: not processes_of(NOBODY), 10, "nobody's processes to end")
                r = self.run_limited(["run", "--ttl", "1s", "k", "--", "sleep", "0.5"],
                                     limited(resource.RLIMIT_NPROC, n, NOBODY))
                self.assert_clean(r, {0, 76, 125})
                if r.returncode == 125:
                    self.assertIn("Resource temporarily unavailable", r.stderr)
                if r.returncode == 76:
                    self.assertIn("cannot start the renewal thread", r.stderr)

    def test_closed_or_full_stdout(self):
        for target, why in ((None, "Bad file descriptor"), ("/dev/full", "No space left")):
            with self.subTest(stdout=target or "closed"):
                out = open(target, "w") if target else None
                try:
                    def close_stdout():
                        if out is None:
                            os.close(1)
                    for args in (["status", "k"], ["acquire", "k"], ["config"], ["--help"]):
                        r = subprocess.run([RLOCK] + args, env=rlock_env(self.server),
                                           stdout=out, stderr=subprocess.PIPE, text=True,
                                           timeout=30, preexec_fn=close_stdout)
                        self.assertEqual(r.returncode, 125, f"{args}: {r.stderr}")
                        self.assertIn(why, r.stderr)
                        # acquire could not hand out its token: it gave the lock back.
                        self.assert_no_lock("k")
                    # The command's own output fails; rlock reports its status and releases.
                    r = subprocess.run([RLOCK, "run", "k", "--", "sh", "-c", "echo hi || exit 9"],
                                       env=rlock_env(self.server), stdout=out,
                                       stderr=subprocess.PIPE, text=True, timeout=30,
                                       preexec_fn=close_stdout)
                    self.assertEqual(r.returncode, 9, r.stderr)
                    self.assert_no_lock("k")
                finally:
                    if out:
                        out.close()
        # The fence counter, the run history and the ends of the runs; nothing written into the
        # Redis connection.
        self.assertEqual(sorted(self.server.cmd("KEYS", "*")),
                         ["{k}:rlock:ended", "{k}:rlock:fence", "{k}:rlock:history"])

    def test_closed_stdin_stays_closed_for_the_command(self):
        r = subprocess.run([RLOCK, "run", "k", "--", "sh", "-c", "cat; echo $?"],
                           env=rlock_env(self.server), capture_output=True, text=True,
                           timeout=30, preexec_fn=lambda: os.close(0))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Bad file descriptor", r.stderr)
        self.assert_no_lock("k")

    def test_unwritable_metrics_file_is_a_warning_and_the_job_runs(self):
        r = self.run_rlock(["run", "--metrics-file", "/proc/no/such/dir/rlock.prom", "k", "--",
                            "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("warning: --metrics-file", r.stderr)
        self.assert_no_lock("k")


if __name__ == "__main__":
    unittest.main()
