"""Starved of resources (descriptors, processes, a writable stdout, a metrics path), rlock fails
with one clean line and a documented status, and never leaves its lock behind."""
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
import unittest

from harness import RLOCK, RedisTestCase, free_port, rlock_env, wait_until
from test_connection import make_certificates, tls_server

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

    def assert_shortage(self, r, n, what, key="k"):
        """R failed for want of WHAT ("file descriptors", "processes") under a limit of N: exit
        125 in one line that names the key, what rlock was doing, the limit and the call."""
        self.assertEqual(r.returncode, 125, r.stderr)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        flag = {"file descriptors": "-n", "processes": "-u"}[what]
        m = re.fullmatch(rf"rlock: error: {key}: (cannot .+?): out of {what} "
                         rf"\(ulimit {flag} {n}; [^:]+: [^)]+\)", lines[0])
        self.assertTrue(m, lines[0])
        return m.group(1)

    def assert_nothing_left(self, key="k"):
        """No lock, no waiter's queue: at most the fence counter and the ends of runs."""
        self.assert_no_lock(key)
        left = set(self.server.cmd("KEYS", f"*{key}*"))
        self.assertLessEqual(left, {f"{{{key}}}:rlock:fence", f"{{{key}}}:rlock:ended",
                                    f"{{{key}}}:rlock:history", f"{{{key}}}:rlock:last-success"})

    @SANITIZED
    def test_few_descriptors(self):
        # Below 4 the dynamic loader itself cannot open libhiredis; from 8 on rlock has enough.
        # In between each limit runs out at another step (descriptors 0-2 are stdio, then the
        # signalfd): 4 at the Redis socket, 5 and 6 at the guardian's pipe, 7 at the pipe that
        # reports the command's exec.
        doing = {}
        for n in range(4, 10):
            for wait in ([], ["--wait", "5s"]):
                with self.subTest(nofile=n, wait=wait):
                    begin = time.monotonic()
                    r = self.run_limited(["run", *wait, "k", "--", "true"],
                                         limited(resource.RLIMIT_NOFILE, n))
                    took = time.monotonic() - begin
                    if n >= 8:
                        self.assertEqual(r.returncode, 0, r.stderr)
                    else:
                        doing[n] = self.assert_shortage(r, n, "file descriptors")
                        # Not Redis being away: no retry, under --wait neither.
                        self.assertLess(took, 2.5, r.stderr)
                    self.assert_nothing_left()
        self.assertTrue(doing[4].startswith("cannot open a connection to Redis at "), doing)
        self.assertEqual([doing[n] for n in (5, 6, 7)],
                         ["cannot start the guardian"] * 2 + ["cannot start the command"])

    @SANITIZED
    def test_few_descriptors_for_kept_output(self):
        # The capture's pipes and the keeper's connection come after what the job needs: from
        # 8 on, the job runs and prints, whatever step the keeping runs out at (said).
        kept = set()
        for n in range(8, 22):
            with self.subTest(nofile=n):
                self.server.cmd("FLUSHALL")
                r = self.run_limited(["run", "--keep-output", "1k", "k", "--", "echo", "ran"],
                                     limited(resource.RLIMIT_NOFILE, n))
                self.assertEqual((r.returncode, r.stdout), (0, "ran\n"), r.stderr)
                self.assertNotIn("rlock: error", r.stderr)
                logs = self.run_limited(["logs", "k"], None)
                if logs.stdout == "ran\n":
                    kept.add(n)
                else:
                    self.assertIn("output", r.stderr)  # what was not kept is said
                self.assert_no_lock("k")
        self.assertIn(21, kept)
        self.assertNotIn(8, kept)

    @SANITIZED
    def test_few_descriptors_for_retries(self):
        # Each attempt needs what the first did, and the attempts' connection one more: from 8
        # on, a run whose next attempt cannot start ends as its last attempt did, recorded.
        retried = set()
        for n in range(8, 22):
            with self.subTest(nofile=n):
                self.server.cmd("FLUSHALL")
                r = self.run_limited(["run", "--retry", "1", "--retry-delay", "0", "k", "--",
                                      "sh", "-c", "echo ran; exit 3"],
                                     limited(resource.RLIMIT_NOFILE, n))
                self.assertEqual(r.returncode, 3, r.stderr)
                self.assertNotIn("rlock: error", r.stderr)
                entries = self.server.cmd("XRANGE", "{k}:rlock:history", "-", "+")
                ends = [dict(zip(f[::2], f[1::2]))["end"] for _, f in entries]
                self.assertTrue(ends and all(e == "exited" for e in ends), ends)
                if r.stdout == "ran\nran\n":
                    retried.add(n)
                    self.assertEqual(len(ends), 2)
                self.assert_no_lock("k")
        self.assertIn(21, retried)
        self.assertNotIn(8, retried)

    @SANITIZED
    def test_few_descriptors_for_the_password_command(self):
        # The command's output and its status come through two pipes, made at each connect.
        r = self.run_limited(["run", "--wait", "5s", "--password-command", "echo pw", "k", "--",
                              "true"], limited(resource.RLIMIT_NOFILE, 4))
        self.assertEqual(self.assert_shortage(r, 4, "file descriptors"),
                         "cannot run the password command (echo ...)")
        self.assert_nothing_left()

    @SANITIZED
    def test_few_descriptors_for_acquire(self):
        # acquire's signalfd takes the fourth descriptor, as run's does; --while-pid reads
        # /proc/PID/stat twice around its pidfd, then listens for the keeper's link.
        me = str(os.getpid())
        for args, n, doing in ((["acquire", "k"], 4, "cannot open a connection to Redis at "),
                               (["acquire", "--while-pid", me, "k"], 4,
                                f"cannot watch --while-pid {me}"),
                               (["acquire", "--while-pid", me, "k"], 5,
                                "cannot open a connection to Redis at ")):
            with self.subTest(args=args, nofile=n):
                r = self.run_limited(["--wait", "5s"] + args, limited(resource.RLIMIT_NOFILE, n))
                self.assertTrue(self.assert_shortage(r, n, "file descriptors").startswith(doing))
                self.assert_nothing_left()

    @SANITIZED
    def test_few_descriptors_for_tls(self):
        # libssl is loaded at the first TLS connection, with a descriptor of its own: status
        # has none left for it at 4, run (with its signalfd) at 5.
        certs = tempfile.mkdtemp(prefix="rlock-tls-")
        self.addCleanup(shutil.rmtree, certs, True)
        make_certificates(certs)
        port = free_port()
        server = tls_server(certs, port)
        self.addCleanup(server.stop)
        tls = ["--redis", f"rediss://127.0.0.1:{port}", "--cacert", os.path.join(certs, "ca.crt")]
        for args, n, key in ((["status", "k"], 4, None),
                             (["run", "--wait", "5s", "k", "--", "true"], 5, "k")):
            with self.subTest(args=args):
                r = subprocess.run([RLOCK, args[0]] + tls + args[1:], env=rlock_env(),
                                   capture_output=True, text=True, timeout=30,
                                   preexec_fn=limited(resource.RLIMIT_NOFILE, n))
                self.assertEqual(r.returncode, 125, r.stderr)
                prefix = f"{key}: " if key else ""
                self.assertEqual(r.stderr, f"rlock: error: {prefix}cannot load OpenSSL's "
                                 f"libssl.so.3 for rediss://: out of file descriptors (ulimit -n "
                                 f"{n}; dlopen: Too many open files)\n")
                self.assertIsNone(server.cmd("GET", "k"))

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
                    self.assert_shortage(r, n, "processes")
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
        self.assertIn("warning: k: --metrics-file", r.stderr)
        self.assert_no_lock("k")


if __name__ == "__main__":
    unittest.main()
