"""rlock run --keep-output with a reader that does not read (rlock-run(1), --keep-output): the lease is
renewed until the release whatever stage the run is in, and a signal, Ctrl-C or rlock stop gives
up what the reader has not taken within a short grace, says how much, and gives the lock back."""
import array
import fcntl
import json
import os
import signal
import subprocess
import termios
import time
import unittest

from harness import RLOCK, RedisTestCase, rlock_env, wait_until

KEY = "lock:job"
# Writes 10 MB as fast as it can: far more than the pipes and rlock's buffer hold.
FLOOD = ["sh", "-c", "yes | head -c 10000000"]
# What the reproduction took, and what rlock takes now: a wide, safe bound.
ENDS_WITHIN = 4.0
F_GETPIPE_SZ = 1032  # fcntl.F_GETPIPE_SZ, Python 3.10 and later


class StalledReader(RedisTestCase):

    def setUp(self):
        super().setUp()
        self.readers = []

    def tearDown(self):
        for fd in self.readers:
            os.close(fd)
        super().tearDown()

    def start_stalled(self, ttl, command=FLOOD):
        """rlock run COMMAND with its stdout a pipe nobody reads (as `| sleep 60`)."""
        read_end, write_end = os.pipe()
        self.readers.append(read_end)
        proc = self.start(["run", "--ttl", ttl, "--keep-output", "1M", KEY, "--", *command],
                          stdout=write_end, stderr=subprocess.PIPE)
        os.close(write_end)
        return proc, read_end

    def wait_stalled(self, read_end):
        """Until the pipe to the reader is full: what rlock read of the output waits on it."""
        size = fcntl.fcntl(read_end, F_GETPIPE_SZ)

        def full():
            waiting = array.array("i", [0])
            fcntl.ioctl(read_end, termios.FIONREAD, waiting)
            return waiting[0] >= size
        wait_until(full, 20, "the reader's pipe to fill", interval=0.01)

    def wait_renewal(self):
        last = [self.server.cmd("PTTL", KEY)]

        def renewed():
            now = self.server.cmd("PTTL", KEY)
            up = now > last[0] + 100
            last[0] = now
            return up
        wait_until(renewed, 20, "a renewal", interval=0.05)

    def assert_ends_promptly(self, proc, status):
        start = time.monotonic()
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - start
        self.assertLess(took, ENDS_WITHIN, err)
        self.assertEqual(proc.returncode, status, err)
        self.assertRegex(err, r"of the command's output were dropped: rlock was asked to stop, "
                              r"and the reader did not take them within 500ms")
        self.assertNotIn("no longer ours", err)
        self.assert_no_lock(KEY)

    def test_term_before_the_first_renewal(self):
        proc, read_end = self.start_stalled("30s")
        self.wait_stalled(read_end)
        proc.send_signal(signal.SIGTERM)
        self.assert_ends_promptly(proc, 143)

    def test_term_after_a_renewal(self):
        proc, read_end = self.start_stalled("3s")
        self.wait_stalled(read_end)
        self.wait_renewal()
        proc.send_signal(signal.SIGTERM)
        self.assert_ends_promptly(proc, 143)

    def test_ctrl_c_before_the_first_renewal(self):
        proc, read_end = self.start_stalled("30s")
        self.wait_stalled(read_end)
        proc.send_signal(signal.SIGINT)
        self.assert_ends_promptly(proc, 130)

    def test_rlock_stop_before_the_first_renewal(self):
        proc, read_end = self.start_stalled("30s")
        self.wait_stalled(read_end)
        r = self.run_rlock(["stop", KEY, "--reason", "stalled"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_ends_promptly(proc, 80)

    def test_rlock_stop_after_a_renewal(self):
        proc, read_end = self.start_stalled("3s")
        self.wait_stalled(read_end)
        self.wait_renewal()
        start = time.monotonic()
        r = self.run_rlock(["stop", KEY])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - start, ENDS_WITHIN, r.stdout + r.stderr)
        self.assert_ends_promptly(proc, 80)

    def test_rlock_stop_while_the_output_drains_ends_the_run_as_stopped(self):
        # The command wrote 100 kB and exited 0; its reader takes nothing. A stop then drops
        # what is left, and the run is recorded as the asker was told: stopped, by whom.
        proc, read_end = self.start_stalled("30s", ["head", "-c", "100000", "/dev/zero"])
        self.wait_stalled(read_end)
        r = self.run_rlock(["stop", KEY, "--reason", "reader hung"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_ends_promptly(proc, 80)
        run = json.loads(self.run_rlock(["history", "--json", KEY]).stdout)["runs"][0]
        self.assertEqual((run["end"], run["reason"]), ("stopped", "reader hung"))
        # The kept output's end says the same, not the command's own "exit 0".
        logs = self.run_rlock(["logs", KEY])
        self.assertRegex(logs.stderr, r"run of fence \d+ .*: stopped", logs.stderr)

    def test_the_lease_is_renewed_while_a_reader_takes_its_time(self):
        # The command writes 100 kB, which the pipes and rlock hold, and ends at once, long before the first renewal (1 s); its
        # reader takes nothing for 4 s, past the 3 s lease: rlock renews meanwhile, waits for
        # it as the command would have, and then gives the lock back as its own.
        proc, read_end = self.start_stalled("3s", ["head", "-c", "100000", "/dev/zero"])
        self.wait_stalled(read_end)
        until = time.monotonic() + 4
        while time.monotonic() < until:
            self.assertIsNotNone(self.server.cmd("GET", KEY), "the lease ran out")
            self.assertIsNone(proc.poll())
            time.sleep(0.1)
        got = 0
        while True:
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            got += len(chunk)
        _, err = proc.communicate(timeout=30)
        self.assertEqual((proc.returncode, got), (0, 100000), err)
        self.assertNotIn("no longer ours", err)
        self.assert_no_lock(KEY)


if __name__ == "__main__":
    unittest.main()
