"""rlock's own plumbing never costs a healthy lease: a stderr nobody reads, and a metrics file on
a file system that does not answer (rlock-run(1) LOGS)."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from harness import RedisTestCase, rlock_env, RLOCK, wait_until

F_SETPIPE_SZ = 1031


def full_pipe():
    """A 4 KiB pipe, filled but for 100 bytes, that nobody reads: (read end, write end)."""
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 100)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    os.read(r, 100)
    return r, w


def drain(fd):
    """What the pipe holds now, less the filling."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
    except BlockingIOError:
        pass
    return data.replace(b"x", b"").decode(errors="replace")


def blocked_writing_stderr(pid):
    """Whether a thread of PID is in write(2) on fd 2 (/proc/PID/task/TID/syscall)."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                fields = f.read().split()
            if len(fields) > 1 and fields[0] == "1" and int(fields[1], 16) == 2:
                return True
    except (FileNotFoundError, ProcessLookupError):
        pass
    return False


class StderrNobodyReads(RedisTestCase):
    def start_on_full_pipe(self, args):
        r, w = full_pipe()
        self.addCleanup(os.close, r)
        p = self.start(["-v"] + args, stderr=w)
        os.close(w)
        return p, r

    def test_the_command_runs_to_its_end_on_its_lease_and_rlock_exits_with_it(self):
        go = self.path("go")
        # Renewals every 200 ms during the stall, each of which must go through; 1.5 s under a
        # sanitizer, whose loaded run lost a 600 ms lease once (ThreadSanitizer beside another
        # suite), stall or not.
        ttl = "1500ms" if os.environ.get("RLOCK_SANITIZE") else "600ms"
        # The command ends when the test says so, never while a racer is under way: a racer
        # that started as the command ended would rightly take the freed lock.
        p, r = self.start_on_full_pipe(
            ["run", "--ttl", ttl, "k", "--", "sh", "-c",
             f"while [ ! -e {go} ]; do sleep 0.05; done"])
        wait_until(lambda: blocked_writing_stderr(p.pid), 10, "rlock's stderr to stall")
        # For 4 s, several ttls, nobody else gets the lock: its renewals go on.
        stalled = time.monotonic()
        racers = 0
        while time.monotonic() - stalled < 4:
            racer = self.run_rlock(["run", "-n", "k", "--", "true"])
            self.assertEqual(racer.returncode, 75, racer.stderr)
            self.assertIsNone(p.poll())
            racers += 1
            time.sleep(0.2)  # pacing of the racers, not synchronisation
        self.assertGreater(racers, 1)
        with open(go, "w"):
            pass
        ended = time.monotonic()
        self.assertEqual(p.wait(timeout=10), 0)
        # With the command, not when someone reads the pipe: within the 1 s rlock gives a
        # stalled stderr at exit, and a wide margin.
        self.assertLess(time.monotonic() - ended, 3.5)
        self.assert_no_lock("k")
        runs = json.loads(self.run_rlock(["history", "--json", "k"]).stdout)["runs"]
        self.assertEqual(len(runs), 1)
        self.assertEqual(runs[0]["exit_status"], 0)
        # The run's true length: about 4 s, not however long stderr stalled.
        self.assertLess(runs[0]["held_ms"], 12000)
        self.assertIn("acquired", drain(r))

    def test_a_term_during_the_stall_ends_the_run_at_once(self):
        p, _ = self.start_on_full_pipe(["run", "--ttl", "600ms", "k", "--", "sleep", "60"])
        wait_until(lambda: blocked_writing_stderr(p.pid), 10, "rlock's stderr to stall")
        os.kill(p.pid, signal.SIGTERM)
        asked = time.monotonic()
        self.assertEqual(p.wait(timeout=10), 128 + signal.SIGTERM)  # the command's death
        self.assertLess(time.monotonic() - asked, 3.5)
        self.assert_no_lock("k")

    def test_dropped_lines_are_counted_once_stderr_drains(self):
        go = self.path("go")
        body = (f"trap : USR1; echo ready > {self.path('ready')}; "
                f"while [ ! -e {go} ]; do sleep 0.05; done")
        p, r = self.start_on_full_pipe(["run", "k", "--", "sh", "-c", body])
        self.wait_file("ready")
        # Each forwarded signal is a line under -v: more than a full pipe and a full queue.
        for _ in range(300):
            os.kill(p.pid, signal.SIGUSR1)
            time.sleep(0.002)  # pacing: signals of one kind pending at once merge into one
        wait_until(lambda: blocked_writing_stderr(p.pid), 10, "rlock's stderr to stall")
        seen = ""

        def notice():
            nonlocal seen
            seen += drain(r)
            return "were dropped: stderr took nothing for" in seen
        wait_until(notice, 10, "the dropped lines' notice")
        with open(go, "w"):
            pass
        self.assertEqual(p.wait(timeout=10), 0)
        seen += drain(r)
        self.assertRegex(seen, r"rlock: warning: \d+ lines of rlock's were dropped")
        self.assertEqual(seen.count("were dropped"), 1, seen)
        self.assertIn("released", seen)  # lines after the stall are written again


class MetricsOnAFrozenFileSystem(RedisTestCase):
    def setUp(self):
        super().setUp()
        self.image = self.path("fs.img")
        self.mnt = tempfile.mkdtemp(prefix="rlock-frozen-")
        subprocess.run(["truncate", "-s", "16M", self.image], check=True)
        subprocess.run(["mkfs.ext4", "-q", self.image], check=True)
        mount = subprocess.run(["mount", "-o", "loop", self.image, self.mnt], capture_output=True,
                               text=True)
        if mount.returncode != 0:
            os.rmdir(self.mnt)
            self.skipTest(f"no loop mount here: {mount.stderr.strip()}")
        self.addCleanup(self.unmount)

    def unmount(self):
        subprocess.run(["fsfreeze", "-u", self.mnt], capture_output=True)
        # A killed writer finishes its system call once thawed: wait for it to let go.
        wait_until(lambda: subprocess.run(["umount", self.mnt], capture_output=True).returncode
                   == 0, 10, "the loop file system to unmount")
        os.rmdir(self.mnt)

    def test_a_frozen_metrics_file_holds_neither_the_release_nor_the_exit(self):
        metrics = os.path.join(self.mnt, "rlock.prom")
        ok = self.run_rlock(["run", "--metrics-file", metrics, "k", "--", "true"])
        self.assertEqual(ok.returncode, 0, ok.stderr)
        subprocess.run(["fsfreeze", "-f", self.mnt], check=True)
        started = time.monotonic()
        r = self.run_rlock(["run", "--metrics-file", metrics, "k", "--", "true"], timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - started, 10)  # the budget is 2 s
        self.assertIn(f"--metrics-file: {metrics} not written within 2s", r.stderr)
        self.assert_no_lock("k")
        runs = json.loads(self.run_rlock(["history", "--json", "k"]).stdout)["runs"]
        self.assertEqual(len(runs), 2)


if __name__ == "__main__":
    unittest.main()
