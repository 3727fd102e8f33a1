"""Hearing about a run and recovering from it: --notify (told once the lock is given back, with
the fleet's failures counted from the history), --retry under the same lock, and what each run
cost (CPU time and peak memory, from wait4's rusage)."""
import json
import os
import signal
import subprocess
import time
import unittest

from harness import RLOCK, RedisTestCase, read_pids, rlock_env, wait_until

# The notification appends one line a time it runs: what it was told.
NOTE = 'echo "$RLOCK_HOST $RLOCK_RESULT $RLOCK_EXIT_STATUS ${RLOCK_FAILURES-unset}" >> "$NOTES"'


def gone(pid):
    """Whether PID has ended (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped before, or as, it was read
        return True


class Notify(RedisTestCase):
    def setUp(self):
        super().setUp()
        self.notes = self.path("notes")

    def run_as(self, host, args, extra_env=None, **kw):
        env = rlock_env(self.server, RLOCK_HOSTNAME=host, NOTES=self.notes, **(extra_env or {}))
        return self.run_rlock(args, env=env, **kw)

    def told(self):
        try:
            with open(self.notes) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def test_a_failure_on_three_hosts_in_turn_is_told_once_on_the_third(self):
        job = ["run", "--notify-after", "3", "--notify", NOTE, "job", "--", "sh", "-c", "exit 3"]
        for host in ("web-1", "web-2", "web-3"):
            r = self.run_as(host, job)
            self.assertEqual(r.returncode, 3, r.stderr)
        # Each host alone has failed once: only the fleet's history knows it is the third.
        self.assertEqual(self.told(), ["web-3 failure 3 3"])
        # From the third on, each failure is told; a success is not, and starts the count over.
        self.assertEqual(self.run_as("web-1", job).returncode, 3)
        self.assertEqual(self.told()[1:], ["web-1 failure 3 4"])
        ok = ["run", "--notify-after", "3", "--notify", NOTE, "job", "--", "true"]
        self.assertEqual(self.run_as("web-2", ok).returncode, 0)
        self.assertEqual(self.run_as("web-3", job).returncode, 3)
        self.assertEqual(len(self.told()), 2, self.told())

    def test_change_tells_the_first_failure_and_the_recovery(self):
        for host, status in (("web-1", 0), ("web-2", 1), ("web-3", 1), ("web-1", 0),
                             ("web-2", 0)):
            r = self.run_as(host, ["run", "--notify-on", "change", "--notify", NOTE, "job", "--",
                                   "sh", "-c", f"exit {status}"])
            self.assertEqual(r.returncode, status, r.stderr)
        self.assertEqual(self.told(), ["web-2 failure 1 1", "web-1 success 0 0"])

    def test_the_notification_runs_once_the_lock_is_given_back(self):
        # It takes the same lock itself: 0 only when the run gave it back before it ran, and
        # the run's end is in the history already (RLOCK_FAILURES counts it).
        took = self.path("took")
        hook = f'"$RLOCK_BIN_UNDER_TEST" run job -- true; echo $? $RLOCK_FAILURES > {took}'
        r = self.run_as("web-1", ["run", "--notify", hook, "job", "--", "false"],
                        extra_env={"RLOCK_BIN_UNDER_TEST": RLOCK})
        self.assertEqual(r.returncode, 1, r.stderr)
        with open(took) as f:
            self.assertEqual(f.read().split(), ["0", "1"])

    def test_a_failing_or_hanging_notification_changes_nothing(self):
        r = self.run_as("web-1", ["run", "--notify-on", "always", "--notify", "exit 7", "job",
                                  "--", "true"])
        self.assertEqual(r.returncode, 0)
        self.assertIn("--notify: its command exited with status 7", r.stderr)
        # A hook that hangs, with a child of its own, is killed, all of it, at its timeout.
        pids = self.path("pids")
        started = time.monotonic()
        r = self.run_as("web-1", ["run", "--notify-timeout", "1s", "--notify",
                                  f"sleep 300 & echo $$ $! > {pids}; wait", "job", "--", "sh", "-c",
                                  "exit 4"], timeout=60)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertLess(time.monotonic() - started, 30)
        self.assertIn("still running after 1s (--notify-timeout); killed", r.stderr)
        with open(pids) as f:
            for pid in map(int, f.read().split()):
                wait_until(lambda: gone(pid), 10, f"the notification's pid {pid} to die")
        self.assert_no_lock("job")

    def test_the_notification_gets_the_run_and_no_password(self):
        self.server.cmd("ACL", "SETUSER", "notifier", "on", ">url-s3cret", "~*", "&*", "+@all")
        url = f"redis://notifier:url-s3cret@127.0.0.1:{self.server.port}"
        env_file = self.path("env")
        r = self.run_as("web-7", ["run", "--keep-output", "64k", "--notify",
                                  f"env > {env_file}; cp \"$RLOCK_OUTPUT_FILE\" {env_file}.out; "
                                  f"echo \"$RLOCK_OUTPUT_FILE\" > {env_file}.path",
                                  "job", "--", "sh", "-c", "echo kept line; exit 5"],
                        extra_env={"RLOCK_REDIS_URL": url, "REDISCLI_AUTH": "cli-s3cret",
                                   "RLOCK_PASSWORD": "env-s3cret"})
        self.assertEqual(r.returncode, 5, r.stderr)
        with open(env_file) as f:
            text = f.read()
        for secret in ("url-s3cret", "cli-s3cret", "env-s3cret"):
            self.assertNotIn(secret, text)
        env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        fence = self.server.cmd("XRANGE", "{job}:rlock:history", "-", "+")[0][1]
        fence = dict(zip(fence[::2], fence[1::2]))["fence"]
        self.assertEqual(env["RLOCK_KEY"], "job")
        self.assertEqual(env["RLOCK_RESULT"], "failure")
        self.assertEqual(env["RLOCK_EXIT_STATUS"], "5")
        self.assertEqual(env["RLOCK_HOST"], "web-7")
        self.assertEqual(env["RLOCK_FENCE"], fence)
        self.assertEqual(env["RLOCK_FAILURES"], "1")
        self.assertGreaterEqual(int(env["RLOCK_DURATION_MS"]), 0)
        # The URL without its password, as the job gets it.
        self.assertEqual(env["RLOCK_REDIS_URL"], f"redis://notifier:@127.0.0.1:{self.server.port}")
        with open(env_file + ".out") as f:
            self.assertEqual(f.read(), "kept line\n")
        with open(env_file + ".path") as f:
            self.assertRegex(f.read(), r"^/dev/fd/\d+\n$")

    def communicate(self, p, timeout, what):
        """(stdout, stderr) of P once it has exited and every holder of its pipes has closed
        them, as `2>&1 | cat` or `$(rlock ...)` wait for; fails after TIMEOUT seconds."""
        try:
            return p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail(f"rlock's stdout or stderr still open after {timeout}s: {what}")

    def test_what_the_hook_left_running_is_killed_when_its_shell_ends(self):
        # The sleep holds rlock's stderr: a reader of it (cron's pipe) would wait 300s.
        pid_file = self.path("sleep.pid")
        p = self.start(["run", "--notify-timeout", "60s", "--notify",
                        f"sleep 300 & echo $! > {pid_file}; echo done", "job", "--", "false"])
        out, err = self.communicate(p, 10, "the hook's sleep was left running")
        self.assertEqual(p.returncode, 1, err)
        self.assertEqual(out, "")  # rlock's stdout is the job's
        self.assertIn("done", err)
        self.assertNotIn("--notify", err)  # neither a timeout nor a failure
        pid = read_pids(pid_file)[0]
        wait_until(lambda: gone(pid), 10, f"the hook's sleep (pid {pid}) to die")

    def test_a_hook_past_its_timeout_is_killed_with_what_ignores_term(self):
        pids = self.path("pids")
        hook = (f"sh -c 'trap \"\" TERM HUP INT; echo $$ >> {pids}; sleep 300; :' & "
                f"echo $$ >> {pids}; wait")
        p = self.start(["run", "--notify-timeout", "1s", "--notify", hook, "job", "--", "false"])
        _, err = self.communicate(p, 30, "the hook outlived --notify-timeout")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("still running after 1s (--notify-timeout); killed", err)
        self.assertEqual(len(read_pids(pids)), 2, err)
        for pid in read_pids(pids):
            wait_until(lambda: gone(pid), 10, f"the hook's pid {pid} to die")

    def test_a_signal_that_ends_rlock_kills_the_hook_at_once(self):
        hook = f'sleep 300 & echo $$ $! > {self.path("pids")}; wait'
        p = self.start(["run", "--notify-timeout", "60s", "--notify", hook, "job", "--", "false"])
        pids = [int(pid) for pid in self.wait_file("pids").split()]
        os.kill(p.pid, signal.SIGTERM)
        _, err = self.communicate(p, 10, "the hook outlived rlock's SIGTERM")
        self.assertEqual(p.returncode, 1, err)
        self.assertIn("--notify: its command was killed: rlock was asked to stop", err)
        for pid in pids:
            wait_until(lambda: gone(pid), 10, f"the hook's pid {pid} to die")

    def test_a_sigkilled_rlock_leaves_no_hook(self):
        hook = (f'cat "$RLOCK_OUTPUT_FILE" > {self.path("seen")}; sleep 300 & '
                f'echo $$ $! > {self.path("pids")}; wait')
        p = self.start(["run", "--keep-output", "64k", "--notify-timeout", "60s", "--notify", hook,
                        "job", "--", "sh", "-c", "echo kept line; exit 3"],
                       env=rlock_env(self.server))
        pids = [int(pid) for pid in self.wait_file("pids").split()]
        with open(self.path("seen")) as f:
            self.assertEqual(f.read(), "kept line\n")
        os.kill(p.pid, signal.SIGKILL)  # rlock alone: its guardian is left to act
        p.wait(timeout=10)
        for pid in pids:
            wait_until(lambda: gone(pid), 10, f"the hook's pid {pid} to die with rlock")

    def test_the_output_file_is_read_by_path_twice_and_by_a_child_of_the_hook(self):
        out = self.path("out")
        hook = (f'cat "$RLOCK_OUTPUT_FILE" > {out}; cat "$RLOCK_OUTPUT_FILE" >> {out}; '
                f'cat < "$RLOCK_OUTPUT_FILE" >> {out}; '
                f'sh -c \'cat "$RLOCK_OUTPUT_FILE"\' > {out}.child; '
                f'readlink /proc/$$/fd/0 > {out}.stdin; '
                f'readlink "$RLOCK_OUTPUT_FILE" > {out}.file')
        # rlock's stdin a pipe: the hook's is /dev/null all the same.
        r = self.run_rlock(["run", "--keep-output", "64k", "--notify", hook, "job", "--",
                            "sh", "-c", "echo kept line; exit 3"], input="")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertNotIn("--notify", r.stderr)
        with open(out) as f:
            self.assertEqual(f.read(), "kept line\n" * 3)
        with open(out + ".child") as f:
            self.assertEqual(f.read(), "kept line\n")
        with open(out + ".stdin") as f:
            self.assertEqual(f.read(), "/dev/null\n")
        # In memory, in no directory another user could plant a link in (rlock-run(1)).
        with open(out + ".file") as f:
            self.assertRegex(f.read(), r"^/memfd:rlock-output \(deleted\)$")

    def test_what_did_not_run_is_told_only_always(self):
        holder = self.start(["run", "job", "--", "sleep", "30"])
        wait_until(lambda: self.server.cmd("GET", "job"), 10, "the holder")
        busy = ["run", "--notify", NOTE, "job", "--", "true"]
        self.assertEqual(self.run_as("web-2", busy).returncode, 75)
        self.assertEqual(self.told(), [])
        always = ["run", "--notify-on", "always", "--notify", NOTE, "job", "--", "true"]
        self.assertEqual(self.run_as("web-2", always).returncode, 75)
        self.assertEqual(self.told(), ["web-2 busy 75 unset"])
        os.killpg(holder.pid, signal.SIGTERM)
        holder.wait(timeout=10)

    def test_always_tells_what_did_not_run_whatever_notify_after_says(self):
        holder = self.start(["run", "job", "--", "sleep", "30"])
        wait_until(lambda: self.server.cmd("GET", "job"), 10, "the holder")
        # An outer rlock's variables are not passed on as this run's.
        r = self.run_as("web-2", ["run", "--notify-on", "always", "--notify-after", "3",
                                  "--notify", NOTE + '; echo "${RLOCK_ATTEMPT-none}" >> "$NOTES"',
                                  "job", "--", "true"], extra_env={"RLOCK_ATTEMPT": "9"})
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertEqual(self.told(), ["web-2 busy 75 unset", "none"])
        os.killpg(holder.pid, signal.SIGTERM)
        holder.wait(timeout=10)

    def test_a_command_that_cannot_run_is_told_only_always_and_asks_no_redis(self):
        script = self.path("report.sh")
        with open(script, "w") as f:
            f.write("#!/usr/bin/no-such-python\nprint('report')\n")
        os.chmod(script, 0o755)
        for command, status in (([self.path("no-such-job")], 127), ([script], 126)):
            with self.subTest(command=command):
                self.assertEqual(self.run_as("web-2", ["run", "--notify", NOTE, "job", "--",
                                                       *command]).returncode, status)
                self.assertEqual(self.told(), [])
                r = self.run_as("web-2", ["run", "--notify-on", "always", "--notify", NOTE,
                                          "job", "--", *command])
                self.assertEqual(r.returncode, status, r.stderr)
                self.assertEqual(self.told(), [f"web-2 error {status} unset"])
                os.remove(self.notes)
        # Said as a shell says it: the script is there, its interpreter is not.
        self.assertIn(f"{script}: bad interpreter /usr/bin/no-such-python: No such file or "
                      "directory", r.stderr)
        # The commonest: DOS line endings make the interpreter "/bin/sh\r".
        with open(script, "w") as f:
            f.write("#!/bin/sh\r\necho report\r\n")
        r = self.run_as("web-2", ["run", "job", "--", script])
        self.assertEqual(r.returncode, 126, r.stderr)
        self.assertIn(f"{script}: bad interpreter /bin/sh\\r: the script has DOS line endings",
                      r.stderr)
        self.assertEqual(self.server.cmd("KEYS", "*"), [])

    def test_a_wait_interrupted_is_told_as_busy(self):
        holder = self.start(["run", "job", "--", "sleep", "30"])
        wait_until(lambda: self.server.cmd("GET", "job"), 10, "the holder")
        env = rlock_env(self.server, RLOCK_HOSTNAME="web-2", NOTES=self.notes)
        waiter = self.start(["run", "--wait", "1m", "--notify-on", "always", "--notify", NOTE,
                             "job", "--", "true"], env=env)
        wait_until(lambda: self.server.cmd("ZCARD", "{job}:rlock:queue") == 1, 10, "the waiter")
        waiter.send_signal(signal.SIGTERM)
        self.assertEqual(waiter.wait(timeout=10), 143)
        self.assertEqual(self.told(), ["web-2 busy 143 unset"])
        os.killpg(holder.pid, signal.SIGTERM)
        holder.wait(timeout=10)

    def test_settings_that_need_another(self):
        for args in (["--notify-after", "2"], ["--notify-on", "always"],
                     ["--notify-timeout", "1s"], ["--retry-delay", "1s"], ["--retry-on", "3"],
                     ["--notify", "true", "--notify-after", "2", "--history-length", "0"],
                     ["--notify", "true", "--notify-on", "change", "--history-length", "0"]):
            with self.subTest(args=args):
                r = self.run_rlock(["run", *args, "job", "--", "true"])
                self.assertEqual(r.returncode, 64, r.stderr)
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                self.assertEqual(self.server.cmd("KEYS", "*"), [])


class EndWithRedisAway(RedisTestCase):
    """Redis gone as the command ends: rlock sends the end again through a restart, for up to
    10s (rlock-run(1) "Lease safety"), and when it cannot, the hook, the history and check all
    say the end is unknown, none that the run failed."""

    HOOK = 'echo "$RLOCK_RESULT $RLOCK_EXIT_STATUS ${RLOCK_RECORDED-unset}" > "$NOTES"'

    def run_with_redis_gone_at_the_end(self, back_after_exit):
        """A run whose command ends while Redis is down; Redis comes back with its data (the
        run's start entry) as soon as the command is gone, or only once rlock has exited."""
        started, go = self.path("started"), self.path("go")
        p = self.start(["run", "--ttl", "2s", "--notify-on", "always", "--notify", self.HOOK,
                        "job", "--", "sh", "-c",
                        f'echo $$ > {started}; while [ ! -e {go} ]; do sleep 0.02; done'],
                       env=rlock_env(self.server, NOTES=self.path("notes")),
                       stderr=subprocess.PIPE)
        command = int(self.wait_file("started"))
        self.server.cmd("SAVE")
        self.server.kill()
        with open(go, "w"):
            pass
        wait_until(lambda: gone(command), 10, "the command to end")
        if back_after_exit:
            _, err = p.communicate(timeout=30)
            self.server.start(port=self.server.port)
        else:
            self.server.start(port=self.server.port)
            _, err = p.communicate(timeout=30)
        self.procs.remove(p)
        self.assertEqual(p.returncode, 0, err)
        return self.wait_file("notes").split(), err

    def newest(self):
        r = self.run_rlock(["history", "job", "--json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["runs"][0]

    def test_redis_back_within_the_budget_has_the_end(self):
        told, err = self.run_with_redis_gone_at_the_end(back_after_exit=False)
        self.assertEqual(told, ["success", "0", "1"], err)
        self.assertEqual((self.newest()["end"], self.newest()["exit_status"]), ("exited", 0))
        self.assertEqual(self.run_rlock(["check", "job", "--every", "1h"]).returncode, 0)
        self.assert_no_lock("job")

    def test_redis_away_past_the_budget_leaves_the_end_unknown_to_every_reader(self):
        told, err = self.run_with_redis_gone_at_the_end(back_after_exit=True)
        # The hook knows how the command ended, and that the history does not.
        self.assertEqual(told, ["success", "0", "0"], err)
        self.assertIn("could not record the run in its history", err)
        # The lock (ttl 2s) expired while Redis was away; its start entry is the run's record.
        wait_until(lambda: self.server.cmd("GET", "job") is None, 10, "the lock to expire")
        self.assertEqual((self.newest()["end"], self.newest()["exit_status"]), ("unknown", None))
        self.assertRegex(self.run_rlock(["history", "job"]).stdout.splitlines()[1],
                         r"end unknown$")
        check = self.run_rlock(["check", "job", "--every", "1h"])
        self.assertEqual(check.returncode, 1, check.stdout)
        self.assertIn("1 run, its end unknown; last: end unknown on ", check.stdout)
        j = json.loads(self.run_rlock(["check", "job", "--every", "1h", "--json"]).stdout)
        self.assertEqual((j["runs_in_window"], j["failures_in_window"], j["unknown_in_window"]),
                         (1, 0, 1))


class Retry(RedisTestCase):
    def attempts(self, key="job"):
        """The history's entries of KEY, oldest first, as dicts."""
        return [dict(zip(f[::2], f[1::2]))
                for _, f in self.server.cmd("XRANGE", "{" + key + "}:rlock:history", "-", "+")]

    def flaky(self, fail_times):
        """A command that fails FAIL_TIMES times, then succeeds; it notes each RLOCK_ATTEMPT."""
        count = self.path("count")
        return ["sh", "-c", f'echo "$RLOCK_ATTEMPT" >> {count}; '
                f'[ $(wc -l < {count}) -gt {fail_times} ]']

    def test_a_command_gone_after_an_attempt_ends_the_next_ones_at_once(self):
        # Attempt 1 removes its own script and fails; attempts 2 and 3 cannot start (127, which
        # --retry retries like any failure). What ended between them is reaped on the last
        # attempt's process (an ASan build catches a use of the one before, freed).
        script = self.path("job.sh")
        with open(script, "w") as f:
            f.write('#!/bin/sh\nrm "$0"\nexit 1\n')
        os.chmod(script, 0o755)
        r = self.run_rlock(["run", "--retry", "2", "--retry-delay", "0", "job", "--", script])
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertEqual(r.stderr.count(f"{script}: command not found"), 2, r.stderr)
        self.assertEqual([(a["attempt"], a["status"]) for a in self.attempts()],
                         [("1", "1"), ("2", "127"), ("3", "127")])

    def test_fails_twice_then_succeeds_under_one_fence(self):
        r = self.run_rlock(["run", "--retry", "2", "--retry-delay", "100ms", "job", "--",
                            *self.flaky(2)])
        self.assertEqual(r.returncode, 0, r.stderr)
        entries = self.attempts()
        self.assertEqual([e["attempt"] for e in entries], ["1", "2", "3"])
        self.assertEqual([e["status"] for e in entries], ["1", "1", "0"])
        self.assertEqual(len({e["fence"] for e in entries}), 1)
        self.assertEqual([e["end"] for e in entries], ["exited"] * 3)
        with open(self.path("count")) as f:
            self.assertEqual(f.read().split(), ["1", "2", "3"])
        self.assertIn("attempt 1 of 3: exit 1; running the command again in 100ms", r.stderr)
        self.assert_no_lock("job")

    def test_only_listed_statuses_are_retried_and_the_last_status_is_rlocks(self):
        r = self.run_rlock(["run", "--retry", "2", "--retry-delay", "0", "--retry-on", "3,5-6",
                            "job", "--", "sh", "-c", "exit 4"])
        self.assertEqual(r.returncode, 4)
        self.assertEqual(len(self.attempts()), 1)
        self.server.cmd("FLUSHALL")
        r = self.run_rlock(["run", "--retry", "2", "--retry-delay", "0", "--retry-on", "3,5-6",
                            "job", "--", "sh", "-c", "exit 5"])
        self.assertEqual(r.returncode, 5)
        self.assertEqual([e["attempt"] for e in self.attempts()], ["1", "2", "3"])

    def test_the_lock_stays_held_and_renewed_between_attempts(self):
        # A ttl shorter than the delay: only renewals keep it.
        p = self.start(["run", "--ttl", "600ms", "--retry", "1", "--retry-delay", "4s", "job", "--",
                        *self.flaky(1)])
        wait_until(lambda: len(self.attempts()) == 1 and "attempt" in self.attempts()[0] and
                   self.attempts()[0]["end"] == "exited", 10, "the first attempt's end")
        fence = self.attempts()[0]["fence"]
        time.sleep(1.2)  # twice the ttl into the delay (a bound, not a synchronisation)
        self.assertIn(f"fence={fence}", self.server.cmd("GET", "job") or "")
        other = self.run_rlock(["run", "job", "--", "true"], env=rlock_env(
            self.server, RLOCK_HOSTNAME="web-2"))
        self.assertEqual(other.returncode, 75, other.stderr)
        p.wait(timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr.read())
        self.assertEqual([e["status"] for e in self.attempts()], ["1", "0"])

    def test_a_signal_between_attempts_ends_the_run_as_the_last_attempt_ended(self):
        p = self.start(["run", "--retry", "5", "--retry-delay", "60s", "job", "--", "sh", "-c",
                        "exit 3"])
        wait_until(lambda: len(self.attempts()) == 1 and self.attempts()[0]["end"] == "exited",
                   10, "the first attempt's end")
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
        self.assertEqual(p.returncode, 3)
        self.assertEqual([(e["attempt"], e["end"]) for e in self.attempts()], [("1", "exited")])
        self.assert_no_lock("job")

    def test_a_stop_between_attempts_is_recorded_for_the_attempt_that_did_not_come(self):
        p = self.start(["run", "--retry", "5", "--retry-delay", "60s", "job", "--", "false"])
        wait_until(lambda: len(self.attempts()) == 1 and self.attempts()[0]["end"] == "exited",
                   10, "the first attempt's end")
        r = self.run_rlock(["stop", "job", "--reason", "enough"])
        self.assertEqual(r.returncode, 0, r.stderr)
        p.wait(timeout=10)
        self.assertEqual(p.returncode, 80)
        entries = self.attempts()
        self.assertEqual([(e["attempt"], e["end"]) for e in entries],
                         [("1", "exited"), ("2", "stopped")])
        self.assertNotIn("cpu_user_ms", entries[1])  # it never ran
        self.assert_no_lock("job")

    def test_a_signal_to_rlock_during_an_attempt_is_not_retried(self):
        started = self.path("started")
        p = self.start(["run", "--retry", "3", "--retry-delay", "0", "job", "--", "sh", "-c",
                        f"touch {started}; exec sleep 30"])
        # The command runs (a signal before it starts ends the run with no attempt at all).
        wait_until(lambda: os.path.exists(started), 10, "the command's start")
        # TERM, which a command's death by does not end the retries by itself (INT would).
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
        self.assertEqual(p.returncode, 143)
        self.assertEqual([e["attempt"] for e in self.attempts()], ["1"])

    def test_an_attempt_that_died_of_sigint_is_the_last(self):
        # Ctrl-C in the command's terminal reaches the command, not rlock: a shell's loop ends.
        r = self.run_rlock(["run", "--retry", "3", "--retry-delay", "0", "job", "--", "sh", "-c",
                            "kill -INT $$"])
        self.assertEqual(r.returncode, 130, r.stderr)
        self.assertEqual([(e["attempt"], e["end"]) for e in self.attempts()], [("1", "signalled")])

    def test_no_attempt_starts_once_the_lock_is_lost_even_with_on_lost_ignore(self):
        p = self.start(["run", "--on-lost", "ignore", "--retry", "3", "--retry-delay", "2s",
                        "job", "--", "false"])
        wait_until(lambda: len(self.attempts()) == 1 and self.attempts()[0]["end"] == "exited",
                   10, "the first attempt's end")
        self.assertEqual(self.run_rlock(["release", "--force", "--now", "job"]).returncode, 0)
        p.wait(timeout=20)
        self.assertEqual(p.returncode, 76, p.stderr.read())
        # The operator's break is recorded between the two attempts.
        self.assertEqual([(e.get("attempt"), e["end"]) for e in self.attempts()],
                         [("1", "exited"), (None, "forced-release"), ("2", "lost")])

    def test_a_lock_broken_between_attempts_is_recorded_broken_by_whom(self):
        p = self.start(["run", "--retry", "3", "--retry-delay", "2s", "job", "--", "false"])
        wait_until(lambda: len(self.attempts()) == 1 and self.attempts()[0]["end"] == "exited",
                   10, "the first attempt's end")
        r = self.run_rlock(["release", "--force", "--reason", "hung job", "job"])
        self.assertEqual(r.returncode, 0, r.stderr)
        p.wait(timeout=20)
        self.assertEqual(p.returncode, 76, p.stderr.read())
        last = self.attempts()[-1]
        self.assertEqual((last.get("attempt"), last["end"], last.get("reason")),
                         ("2", "broken", "hung job"))

    def test_max_run_bounds_all_attempts(self):
        started = time.monotonic()
        r = self.run_rlock(["run", "--retry", "100", "--retry-delay", "300ms", "--max-run", "2s",
                            "job", "--", "false"], timeout=60)
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assertLess(time.monotonic() - started, 30)
        ends = [e["end"] for e in self.attempts()]
        self.assertEqual(ends[-1], "max-run")
        self.assertTrue(all(e == "exited" for e in ends[:-1]), ends)

    def test_once_per_records_the_period_once_with_the_last_attempt(self):
        r = self.run_rlock(["run", "--once-per", "1d", "--retry", "1", "--retry-delay", "0",
                            "job", "--", *self.flaky(1)])
        self.assertEqual(r.returncode, 0, r.stderr)
        slot = [k for k in self.server.cmd("KEYS", "{job}:rlock:once:*")]
        self.assertEqual(len(slot), 1)
        record = self.server.cmd("HGETALL", slot[0])
        self.assertEqual(dict(zip(record[::2], record[1::2]))["status"], "0")
        again = self.run_rlock(["run", "--once-per", "1d", "job", "--", "true"])
        self.assertEqual(again.returncode, 75, again.stderr)


class Cost(RedisTestCase):
    def last_run(self, key="job"):
        r = self.run_rlock(["history", key, "--json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["runs"][0]

    def test_peak_memory_and_cpu_time_of_the_command_and_what_it_left(self):
        metrics = self.path("rlock.prom")
        # 200 MB touched, then a busy second of CPU.
        job = ("b = bytearray(200 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
               "import time\nt = time.process_time()\n"
               "while time.process_time() - t < 1.0: pass\n")
        r = self.run_rlock(["run", "--metrics-file", metrics, "job", "--", "python3", "-c", job])
        self.assertEqual(r.returncode, 0, r.stderr)
        run = self.last_run()
        self.assertGreaterEqual(run["max_rss_kb"], 200 * 1024)
        self.assertGreaterEqual(run["cpu_user_ms"] + run["cpu_sys_ms"], 900)
        with open(metrics) as f:
            text = f.read()
        self.assertIn('rlock_cpu_seconds_total{key="job",mode="user"}', text)
        peak = [line for line in text.splitlines()
                if line.startswith('rlock_last_run_max_rss_bytes{key="job"}')]
        self.assertGreaterEqual(float(peak[0].split()[-1]), 200 << 20)
        # A process the command left behind, that rlock reaps as its subreaper, counts too.
        self.server.cmd("FLUSHALL")
        r = self.run_rlock(["run", "job", "--", "sh", "-c",
                            "python3 -c 'b = bytearray(150 << 20); b[::4096] = "
                            "b\"x\" * len(b[::4096])' & exit 0"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(self.last_run()["max_rss_kb"], 150 * 1024)

    def test_check_slower_than(self):
        r = self.run_rlock(["run", "job", "--", "sleep", "1.2"])
        self.assertEqual(r.returncode, 0, r.stderr)
        slow = self.run_rlock(["check", "job", "--every", "1h", "--slower-than", "1s"])
        self.assertEqual(slow.returncode, 1, slow.stderr)
        self.assertIn("job: slow: the last success", slow.stdout)
        self.assertIn("more than --slower-than 1s", slow.stdout)
        ok = self.run_rlock(["check", "job", "--every", "1h", "--slower-than", "1m"])
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("job: ok", ok.stdout)


if __name__ == "__main__":
    unittest.main()
