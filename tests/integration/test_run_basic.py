"""rlock run: acquire, environment, exit statuses, contention, renewal, fencing, --min-hold."""
import os
import signal
import time
import unittest

from harness import RedisTestCase, read_pids, wait_until


class RunBasics(RedisTestCase):
    def test_child_sees_the_lock_and_its_environment(self):
        out = self.path("env")
        script = f'echo "$RLOCK_KEY $RLOCK_TOKEN $RLOCK_FENCE $RLOCK_TTL_MS" > {out}; sleep 30'
        before = self.server.time_us()
        p = self.start(["run", "--ttl", "10s", "jobs:report", "--", "sh", "-c", script])
        key, token, fence, ttl_ms = self.wait_file("env").split()
        self.assertEqual(key, "jobs:report")
        self.assertRegex(token, r"^[0-9a-f]{32}$")
        self.assertGreaterEqual(int(fence), before)  # fences start from the server's clock
        self.assertEqual(self.server.cmd("GET", "{jobs:report}:rlock:fence"), fence)
        self.assertEqual(ttl_ms, "10000")
        value = self.server.cmd("GET", "jobs:report")
        # `redis-cli GET KEY` alone tells an operator who holds it.
        self.assertTrue(value.startswith(f"rlock/1 {token} host="), value)
        self.assertIn(f" pid={p.pid} ", value)
        self.assertIn(" cmd=sh ", value)
        self.assertIn(" user=", value)
        self.assertIn(" since=", value)
        self.assertTrue(value.endswith(f" fence={fence}"), value)  # whole digits, never 1.7e+15
        self.assertNotIn("sleep 30", value)  # arguments may hold secrets: never stored
        pttl = self.server.cmd("PTTL", "jobs:report")
        self.assertTrue(0 < pttl <= 10000, pttl)
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.wait(timeout=10), 128 + signal.SIGTERM)
        self.assert_no_lock("jobs:report")

    def test_exit_status_passes_through_and_the_lock_is_released(self):
        for code in (0, 1, 3, 42, 255):
            with self.subTest(code=code):
                r = self.run_rlock(["run", "k", "--", "sh", "-c", f"exit {code}"])
                self.assertEqual(r.returncode, code, r.stderr)
                self.assert_no_lock("k")

    def test_death_by_signal_is_128_plus_n(self):
        for sig in (signal.SIGKILL, signal.SIGSEGV, signal.SIGTERM):
            with self.subTest(sig=sig):
                r = self.run_rlock(["run", "k", "--", "sh", "-c", f"kill -{int(sig)} $$"])
                self.assertEqual(r.returncode, 128 + sig, r.stderr)
                self.assert_no_lock("k")

    def test_shell_text_with_dash_c(self):
        r = self.run_rlock(["run", "k", "-c", 'echo "$RLOCK_KEY" | tr k K; exit 7'])
        self.assertEqual(r.returncode, 7)
        self.assertEqual(r.stdout, "K\n")
        self.assert_no_lock("k")

    def test_stdin_stdout_stderr_pass_through(self):
        r = self.run_rlock(["run", "k", "--", "sh", "-c", "cat; echo err >&2"], input="hello\n")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout, "hello\n")
        self.assertEqual(r.stderr, "err\n")

    def test_no_rlock_descriptor_leaks_into_the_child(self):
        with open(os.devnull) as devnull:
            r = self.run_rlock(["run", "k", "--", "sh", "-c", "ls /proc/$$/fd"], stdin=devnull)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(int(x) for x in r.stdout.split()), [0, 1, 2])

    def test_busy_fails_fast_with_75_and_names_the_holder(self):
        holder = self.start(["run", "k", "--", "sh", "-c", f"echo $$ > {self.path('pid')}; sleep 30"])
        self.wait_file("pid")
        marker = self.path("ran")
        start = time.monotonic()
        r = self.run_rlock(["run", "k", "--", "touch", marker])
        self.assertEqual(r.returncode, 75)
        self.assertLess(time.monotonic() - start, 5)
        self.assertFalse(os.path.exists(marker), "the second command ran while the lock was held")
        self.assertIn("busy, held by", r.stderr)
        self.assertIn(f"pid {holder.pid} (sh)", r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1)
        r = self.run_rlock(["run", "-E", "3", "k", "--", "true"])
        self.assertEqual(r.returncode, 3)
        r = self.run_rlock(["run", "-q", "k", "--", "true"])
        self.assertEqual((r.returncode, r.stderr), (75, ""))

    def test_a_foreign_plain_string_lock_is_respected(self):
        self.server.cmd("SET", "k", "java-service-uuid-1234", "PX", 30000)
        r = self.run_rlock(["run", "k", "--", "true"])
        self.assertEqual(r.returncode, 75)
        self.assertIn('another client (value "java-service-uuid-1234")', r.stderr)
        self.assertEqual(self.server.cmd("GET", "k"), "java-service-uuid-1234")

    def test_a_key_of_another_type_is_69_and_untouched(self):
        self.server.cmd("HSET", "k", "f", "v")
        r = self.run_rlock(["run", "k", "--", "true"])
        self.assertEqual(r.returncode, 69)
        self.assertIn("not a lock: the key holds a hash", r.stderr)
        self.assertEqual(self.server.cmd("HGET", "k", "f"), "v")

    def test_wait_gets_the_lock_when_the_holder_ends(self):
        self.start(["run", "k", "--", "sh", "-c", f"echo x > {self.path('held')}; sleep 1"])
        self.wait_file("held")
        r = self.run_rlock(["run", "-w", "20s", "k", "--", "echo", "mine"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "mine\n")
        self.assertIn("acquired after waiting", r.stderr)
        self.assert_no_lock("k")

    def test_wait_runs_out_with_75(self):
        self.server.cmd("SET", "k", "other", "PX", 60000)
        start = time.monotonic()
        r = self.run_rlock(["run", "--wait", "700ms", "k", "--", "true"])
        elapsed = time.monotonic() - start
        self.assertEqual(r.returncode, 75)
        self.assertGreaterEqual(elapsed, 0.7)
        self.assertLess(elapsed, 10)
        self.assertEqual(self.server.cmd("GET", "k"), "other")

    def test_wait_notices_a_dead_holder_at_its_expiry(self):
        # A holder that died without releasing: its key expires in 1.5 s.
        self.server.cmd("SET", "k", "crashed-holder", "PX", 1500)
        start = time.monotonic()
        r = self.run_rlock(["run", "-w", "inf", "k", "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - start, 10)

    def test_the_lock_is_renewed_past_its_ttl(self):
        p = self.start(["run", "--ttl", "600ms", "k", "--", "sleep", "2.5"])
        wait_until(lambda: self.server.cmd("GET", "k"), 5, "lock taken")
        # Four ttls later the key still exists and a second host is still refused.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            pttl = self.server.cmd("PTTL", "k")
            self.assertGreater(pttl, 0, "the lock expired while its command ran")
            time.sleep(0.05)
        self.assertEqual(self.run_rlock(["run", "k", "--", "true"]).returncode, 75)
        self.assertEqual(p.wait(timeout=10), 0)
        self.assert_no_lock("k")

    def test_fence_increases_across_acquisitions_expiry_and_restart(self):
        def fence():
            r = self.run_rlock(["run", "k", "--", "sh", "-c", "echo $RLOCK_FENCE"])
            self.assertEqual(r.returncode, 0, r.stderr)
            return int(r.stdout)
        first = fence()
        second = fence()
        self.assertGreater(second, first)
        # A holder that expired (min-hold leaves the key to expire) does not reset the count.
        self.assertEqual(self.run_rlock(["run", "--min-hold", "300ms", "k", "--", "true"]).returncode, 0)
        wait_until(lambda: self.server.cmd("EXISTS", "k") == 0, 5, "min-hold expiry")
        third = fence()
        self.assertGreater(third, second + 1)
        # Redis restarted with its data.
        self.server.cmd("SAVE")
        self.server.restart()
        self.assertGreater(fence(), third)

    def test_min_hold_keeps_the_lock_after_a_quick_command(self):
        r = self.run_rlock(["run", "--min-hold", "3s", "k", "--", "true"])
        self.assertEqual(r.returncode, 0)
        pttl = self.server.cmd("PTTL", "k")
        self.assertTrue(1000 < pttl <= 3000, pttl)
        # A second host whose cron fires a little late does not run the job again.
        self.assertEqual(self.run_rlock(["run", "k", "--", "true"]).returncode, 75)

    def test_min_hold_shorter_than_the_run_releases_at_the_end(self):
        r = self.run_rlock(["run", "--min-hold", "100ms", "k", "--", "sleep", "0.3"])
        self.assertEqual(r.returncode, 0)
        self.assert_no_lock("k")

    def test_max_run_stops_the_command_and_its_children_with_124(self):
        pids = self.path("pids")
        script = f"sleep 60 & echo $! >> {pids}; echo $$ >> {pids}; wait"
        start = time.monotonic()
        r = self.run_rlock(["run", "--max-run", "500ms", "k", "--", "sh", "-c", script])
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assertLess(time.monotonic() - start, 10)
        self.assertIn("--max-run", r.stderr)
        for pid in read_pids(pids):
            self.assertFalse(os.path.exists(f"/proc/{pid}"), f"pid {pid} survived --max-run")
        self.assert_no_lock("k")

    def test_max_run_escalates_to_kill_after_kill_after(self):
        script = "trap '' TERM; sleep 60 & wait; sleep 60"
        start = time.monotonic()
        r = self.run_rlock(["run", "--max-run", "300ms", "--kill-after", "300ms", "k", "--",
                            "sh", "-c", script])
        self.assertEqual(r.returncode, 124)
        self.assertLess(time.monotonic() - start, 10)
        self.assertIn("sending KILL", r.stderr)

    def test_kill_signal_is_the_one_sent(self):
        out = self.path("got")
        script = f"trap 'echo USR1 > {out}; exit 0' USR1; sleep 60 & wait"
        r = self.run_rlock(["run", "--max-run", "300ms", "--kill-signal", "USR1", "k", "--",
                            "sh", "-c", script])
        self.assertEqual(r.returncode, 124)
        with open(out) as f:
            self.assertEqual(f.read(), "USR1\n")

    def test_commands_that_cannot_run_leave_nothing_in_redis(self):
        r = self.run_rlock(["run", "k", "--", "no-such-command-rlock"])
        self.assertEqual(r.returncode, 127)
        self.assertIn("command not found", r.stderr)
        plain = self.path("not-executable")
        open(plain, "w").close()
        r = self.run_rlock(["run", "k", "--", plain])
        self.assertEqual(r.returncode, 126)
        self.assertEqual(self.server.cmd("DBSIZE"), 0)
        # Through the shell: the shell reports it, rlock passes the status on and releases.
        r = self.run_rlock(["run", "k", "-c", "no-such-command-rlock"])
        self.assertEqual(r.returncode, 127)
        self.assert_no_lock("k")

    def test_prefix_is_prepended(self):
        r = self.run_rlock(["run", "--prefix", "lock:", "daily", "--", "sh", "-c", 'echo "$RLOCK_KEY"'])
        self.assertEqual(r.stdout, "lock:daily\n")


class Unreachable(unittest.TestCase):
    def test_unreachable_redis_is_69_and_the_command_never_runs(self):
        from harness import free_port, run_rlock
        import tempfile
        marker = os.path.join(tempfile.mkdtemp(), "ran")
        port = free_port()
        r = run_rlock(["run", "--redis", f"redis://127.0.0.1:{port}", "k", "--", "touch", marker])
        self.assertEqual(r.returncode, 69)
        self.assertIn("cannot connect", r.stderr)
        self.assertFalse(os.path.exists(marker))
        r = run_rlock(["run", "-w", "5s", "--redis", f"redis://127.0.0.1:{port}", "k", "--", "true"])
        self.assertEqual(r.returncode, 69)


if __name__ == "__main__":
    unittest.main()
