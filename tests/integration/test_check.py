"""rlock check KEY --every PERIOD: the dead-man's switch of a fleet's job, read from the key's
history by the Redis server's clock."""
import json
import os
import signal
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from harness import RedisServer, RedisTestCase, free_port, rlock_env, run_rlock, wait_until

DAY_MS = 86400 * 1000


class Check(RedisTestCase):
    def run_as(self, host, args, **kw):
        return self.run_rlock(args, env=rlock_env(self.server, RLOCK_HOSTNAME=host), **kw)

    def check(self, *args):
        return self.run_rlock(["check", *args])

    def server_ms(self, server=None):
        secs, micros = (server or self.server).cmd("TIME")
        return int(secs) * 1000 + int(micros) // 1000

    def record(self, key, ended_ms, host="web-1", status=0, end="exited", server=None):
        """A history entry as rlock run writes it, for a run that ended at ENDED_MS by the
        server's clock (its stream ID): a run of yesterday, without waiting a day."""
        since = datetime.fromtimestamp((ended_ms - 5000) / 1000, timezone.utc)
        (server or self.server).cmd(
            "XADD", "{%s}:rlock:history" % key, f"{ended_ms}-0", "host", host, "pid", "4121",
            "user", "ops", "cmd", "report.sh",
            "since", since.strftime("%Y-%m-%dT%H:%M:%S.") + f"{since.microsecond // 1000:03d}Z",
            "fence", "7", "waited_ms", "0", "held_ms", "5000", "status", str(status), "end", end)

    def test_passes_after_a_successful_run(self):
        self.assertEqual(self.run_as("web-1", ["run", "lock:job", "--", "true"]).returncode, 0)
        r = self.check("lock:job", "--every", "1h")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^lock:job: ok, last success \S+Z on web-1 \(exit 0 after")
        self.assertEqual(len(r.stdout.splitlines()), 1)
        self.assertEqual(r.stderr, "")
        # -q: a monitoring cron mails only a failing line.
        quiet = self.check("-q", "lock:job", "--every", "1h")
        self.assertEqual((quiet.returncode, quiet.stdout, quiet.stderr), (0, "", ""))
        failing = self.check("-q", "lock:other", "--every", "1h")
        self.assertEqual(failing.returncode, 1)
        self.assertIn("lock:other: no run recorded", failing.stdout)

    def test_fails_after_only_failed_runs_naming_the_status_and_host(self):
        for _ in range(2):
            self.assertEqual(
                self.run_as("web-2", ["run", "lock:job", "--", "sh", "-c", "exit 3"]).returncode, 3)
        # A skip record (--record-skips) is no run: it changes nothing.
        self.server.cmd("SET", "lock:job", "someone-else", "PX", 60000)
        busy = self.run_as("web-3", ["run", "--record-skips", "lock:job", "--", "true"])
        self.assertEqual(busy.returncode, 75)
        self.server.cmd("DEL", "lock:job")
        r = self.check("lock:job", "--every", "1d")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stdout, r"^lock:job: no successful run in the last 1d \(since \S+Z\): "
                                   r"2 runs, all failed; last: exit 3 on web-2 at \S+Z; "
                                   r"no success in its history\n$")
        self.assertNotIn("web-3", r.stdout)

    def test_fails_when_the_window_has_no_run(self):
        self.record("lock:job", self.server_ms() - DAY_MS * 3 // 2, host="web-1")
        r = self.check("lock:job", "--every", "1d")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stdout, r"^lock:job: no run in the last 1d \(since \S+Z\); "
                                   r"last: exit 0 on web-1 at \S+Z\n$")
        # The same run is within a longer window; and a short one runs out as time passes.
        self.assertEqual(self.check("lock:job", "--every", "2d").returncode, 0)
        # (A window wide enough for a sanitizer build's start-up between the run and the check,
        # then one the run leaves within the wait.)
        self.assertEqual(self.run_as("web-1", ["run", "lock:job", "--", "true"]).returncode, 0)
        self.assertEqual(self.check("lock:job", "--every", "30s").returncode, 0)
        wait_until(lambda: self.check("lock:job", "--every", "2s").returncode == 1, 10,
                   "the run to leave a 2s window")

    def test_an_old_success_and_a_failure_inside_the_window_are_both_named(self):
        old = self.server_ms() - 2 * DAY_MS
        self.record("lock:job", old, host="web-1")
        self.assertEqual(
            self.run_as("web-2", ["run", "lock:job", "--", "sh", "-c", "exit 3"]).returncode, 3)
        r = self.check("lock:job", "--every", "1d")
        self.assertEqual(r.returncode, 1, r.stderr)
        stamp = datetime.fromtimestamp(old / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        self.assertRegex(r.stdout, r"^lock:job: no successful run in the last 1d \(since \S+\): "
                                   r"1 run, failed; last: exit 3 on web-2 at \S+Z; last success "
                                   + stamp + r"\.\d{3}Z on web-1\n$")

    def test_a_key_without_history_says_so(self):
        r = self.check("lock:never", "--every", "1d")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout, "lock:never: no run recorded (history is written by rlock run; "
                                   "--history-length 0 disables it)\n")

    def test_a_once_per_job_without_history_counts_its_period_record(self):
        job = ["run", "--history-length", "0", "--once-per", "day", "lock:job", "--", "true"]
        self.assertEqual(self.run_as("web-1", job).returncode, 0)
        r = self.check("lock:job", "--every", "day")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("on web-1", r.stdout)
        self.assertIn("this period's --once-per record", r.stdout)
        # Another period is not the job's: no record of it.
        self.assertEqual(self.check("lock:job", "--every", "25h").returncode, 1)
        # A failed run in the period's record is no success.
        self.server.cmd("FLUSHALL")
        job[-1:] = ["sh", "-c", "exit 3"]
        self.assertEqual(self.run_as("web-1", job).returncode, 3)
        self.assertEqual(self.check("lock:job", "--every", "day").returncode, 1)

    def test_calendar_day_in_a_time_zone(self):
        # A success midway between the start of today in UTC and in the zone: inside exactly one
        # of the two days, which Python tells from the server's clock.
        zone = "Asia/Tokyo"
        for _ in range(3):  # again if a day ended while the test ran
            self.server.cmd("FLUSHALL")
            now = self.server_ms()
            starts = {}
            for name in ("UTC", zone):
                local = datetime.fromtimestamp(now / 1000, ZoneInfo(name))
                midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
                starts[name] = int(midnight.timestamp() * 1000)
            ended = (starts["UTC"] + starts[zone]) // 2
            self.record("lock:job", ended)
            utc = self.check("lock:job", "--every", "day")
            tz = self.check("lock:job", "--every", "day", "--tz", zone)
            if self.server_ms() // DAY_MS == now // DAY_MS:
                break
        expect_utc = 0 if starts["UTC"] < starts[zone] else 1
        self.assertEqual((utc.returncode, tz.returncode), (expect_utc, 1 - expect_utc),
                         utc.stdout + tz.stdout)
        failing = tz if expect_utc == 0 else utc
        self.assertRegex(failing.stdout, r"no run in this period \(\d{4}-\d\d-\d\d, (UTC|Asia/Tokyo)"
                                         r"; since \S+Z\); last: exit 0 on web-1")
        day = datetime.fromtimestamp(now / 1000, ZoneInfo(zone)).strftime("%Y-%m-%d")
        j = json.loads(self.check("lock:job", "--every", "day", "--tz", zone, "--json").stdout)
        self.assertEqual((j["period"], j["tz"]), (day, zone))
        self.assertEqual(j["window_start"][:19],
                         datetime.fromtimestamp(starts[zone] / 1000, timezone.utc)
                         .strftime("%Y-%m-%dT%H:%M:%S"))

    def test_json_has_the_facts(self):
        old = self.server_ms() - 2 * DAY_MS
        self.record("lock:job", old, host="web-1")
        self.assertEqual(
            self.run_as("web-2", ["run", "lock:job", "--", "sh", "-c", "exit 3"]).returncode, 3)
        r = self.check("lock:job", "--every", "1d", "--json")
        self.assertEqual(r.returncode, 1, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["key"], j["every"], j["ok"], j["tz"], j["period"]),
                         ("lock:job", "1d", False, None, None))
        self.assertEqual((j["runs_in_window"], j["failures_in_window"], j["history_entries"]),
                         (1, 1, 2))
        self.assertEqual(j["last_run"]["host"], "web-2")
        self.assertEqual((j["last_run"]["exit_status"], j["last_run"]["end"]), (3, "exited"))
        self.assertEqual(j["last_success"]["host"], "web-1")
        self.assertEqual(j["last_success"]["in_window"], False)
        self.assertEqual(j["last_success"]["source"], "history")
        self.assertEqual(j["last_success"]["command"],
                         "report.sh")
        ended = datetime.strptime(j["last_success"]["ended"], "%Y-%m-%dT%H:%M:%S.%f%z")
        self.assertEqual(int(ended.timestamp() * 1000), old)
        self.assertEqual(j["running"], [])
        self.assertEqual(j["unanswered"], [])
        now = datetime.strptime(j["now"], "%Y-%m-%dT%H:%M:%S.%f%z")
        start = datetime.strptime(j["window_start"], "%Y-%m-%dT%H:%M:%S.%f%z")
        self.assertEqual((now - start).total_seconds(), 86400)
        empty = json.loads(self.check("lock:none", "--every", "1d", "--json").stdout)
        self.assertEqual((empty["ok"], empty["last_run"], empty["last_success"],
                          empty["history_entries"]), (False, None, None, 0))

    def test_a_job_running_now_is_mentioned(self):
        # An earlier run that succeeded a minute ago (the running one's start entry comes
        # after it in the stream).
        self.record("lock:job", self.server_ms() - 60000, host="web-2")
        started = self.path("started")
        holder = self.start(["run", "lock:job", "--", "sh", "-c", f"touch {started}; sleep 30"],
                            env=rlock_env(self.server, RLOCK_HOSTNAME="web-1"))
        wait_until(lambda: os.path.exists(started), 10, "the job to start")
        # Its start is no run of the window: running, neither a success nor a failure.
        r = self.check("lock:job", "--every", "30s")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stdout, rf"; running now on web-1 pid {holder.pid} since \S+Z\n$")
        j = json.loads(self.check("lock:job", "--every", "30s", "--json").stdout)
        self.assertEqual([(h["host"], h["pid"]) for h in j["running"]], [("web-1", holder.pid)])
        self.assertEqual(j["last_run"]["host"], "web-2")
        # Still ok when an earlier run succeeded, and still says it runs.
        r = self.check("lock:job", "--every", "1d")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("on web-2", r.stdout)
        self.assertIn("running now on web-1", r.stdout)

    def test_check_writes_nothing(self):
        self.assertEqual(self.run_as("web-1", ["run", "lock:job", "--", "true"]).returncode, 0)
        keys = sorted(self.server.cmd("KEYS", "*"))
        stream = self.server.cmd("XRANGE", "{lock:job}:rlock:history", "-", "+")
        ttl = self.server.cmd("PTTL", "{lock:job}:rlock:history")
        for args in (["lock:job", "--every", "1d"], ["lock:job", "--every", "day", "--json"],
                     ["lock:other", "--every", "1h"]):
            self.check(*args)
        self.assertEqual(sorted(self.server.cmd("KEYS", "*")), keys)
        self.assertEqual(self.server.cmd("XRANGE", "{lock:job}:rlock:history", "-", "+"), stream)
        self.assertLessEqual(self.server.cmd("PTTL", "{lock:job}:rlock:history"), ttl)
        writes = [line for line in self.server.cmd("INFO", "commandstats").splitlines()
                  if line.startswith(("cmdstat_xadd", "cmdstat_set", "cmdstat_evalsha",
                                      "cmdstat_eval:", "cmdstat_del", "cmdstat_pexpire"))]
        self.server.cmd("CONFIG", "RESETSTAT")
        for args in (["lock:job", "--every", "1d"], ["lock:none", "--every", "day"]):
            self.check(*args)
        stats = self.server.cmd("INFO", "commandstats")
        for name in ("xadd", "set", "evalsha", "eval", "del", "pexpire", "hset", "persist"):
            self.assertNotIn(f"cmdstat_{name}:", stats)
        self.assertTrue(writes)  # the run itself wrote; the checks did not

    def test_usage_and_unreachable(self):
        for args, words in [(["lock:job"], "--every is required"),
                            (["lock:job", "--every", "fortnight"], "--every 'fortnight'"),
                            (["lock:job", "--every", "1500ms"], "whole seconds"),
                            (["lock:job", "--every", "5000d"],
                             "--every '5000d' is too long: at most 3660d"),
                            (["lock:job", "--every", "day", "--tz", "Mars/Olympus"],
                             "unknown time zone"),
                            (["--every", "1d"], "KEY is required")]:
            r = self.check(*args)
            self.assertEqual(r.returncode, 64, (args, r.stderr))
            self.assertIn(words, r.stderr)
            self.assertEqual(r.stdout, "")
        # Options before the command, --every among them.
        self.assertEqual(run_rlock(["--every", "1d", "check", "lock:job"], self.server).returncode,
                         1)
        down = rlock_env(RLOCK_REDIS_URL=f"redis://127.0.0.1:{free_port()}")
        r = run_rlock(["check", "lock:job", "--every", "1d"], env=down)
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)


class RetriedRuns(RedisTestCase):
    """A run is a run: under --retry each attempt is a history entry of the run's one fence, and
    check counts the run once, as its last attempt ended (as --notify and RLOCK_FAILURES do)."""

    def retried(self, script, retries=3, key="lock:job"):
        return self.run_rlock(["run", "--retry", str(retries), "--retry-delay", "0", key, "--",
                               "sh", "-c", script])

    def flaky(self, fail_times):
        """A shell script that fails FAIL_TIMES times (its attempts counted in a file), then
        succeeds."""
        count = self.path("count")
        return f'echo x >> {count}; [ $(wc -l < {count}) -gt {fail_times} ] || exit 3'

    def check(self, *args):
        return self.run_rlock(["check", "lock:job", "--every", "1h", *args])

    def test_four_failed_attempts_are_one_failed_run(self):
        self.assertEqual(self.retried("exit 3").returncode, 3)
        self.assertEqual(self.server.cmd("XLEN", "{lock:job}:rlock:history"), 4)
        r = self.check()
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stdout, r"^lock:job: no successful run in the last 1h \(since \S+Z\): "
                                   r"1 run, failed; last: exit 3 \(attempt 4\) on \S+ at \S+Z; "
                                   r"no success in its history\n$")
        j = json.loads(self.check("--json").stdout)
        self.assertEqual((j["runs_in_window"], j["failures_in_window"], j["failures_since_count"],
                          j["history_entries"]), (1, 1, 1, 4))
        self.assertEqual([f["attempt"] for f in j["failures_since"]], [4])
        self.assertEqual((j["last_run"]["attempt"], j["last_run"]["exit_status"]), (4, 3))

    def test_a_run_that_succeeds_on_its_third_attempt_is_one_success(self):
        r = self.retried(self.flaky(2))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.check()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^lock:job: ok, last success \S+Z on \S+ \(exit 0 after "
                                   r"\S+, attempt 3\)\n$")
        j = json.loads(self.check("--json").stdout)
        self.assertEqual((j["ok"], j["runs_in_window"], j["failures_in_window"],
                          j["failures_since_count"], j["failures_since"]), (True, 1, 0, 0, []))
        self.assertEqual(j["last_success"]["attempt"], 3)

    def test_two_runs_each_retried_are_two_runs(self):
        for _ in range(2):
            self.assertEqual(self.retried("exit 3", retries=2).returncode, 3)
        r = self.check()
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(": 2 runs, all failed; last: exit 3 (attempt 3) on ", r.stdout)
        j = json.loads(self.check("--json").stdout)
        self.assertEqual((j["runs_in_window"], j["failures_in_window"], j["failures_since_count"]),
                         (2, 2, 2))
        fences = [f["fence"] for f in j["failures_since"]]
        self.assertEqual(len(set(fences)), 2, fences)
        # A third, retried to success: one more run, and the two failures are before it.
        self.assertEqual(self.retried(self.flaky(1), retries=2).returncode, 0)
        j = json.loads(self.check("--json").stdout)
        self.assertEqual((j["ok"], j["runs_in_window"], j["failures_in_window"],
                          j["failures_since_count"]), (True, 3, 2, 0))

    def test_a_run_whose_next_attempt_runs_is_not_counted_yet(self):
        # Its first attempt failed; its second runs now: the run has not ended.
        started = self.path("started")
        p = self.start(["run", "--retry", "1", "--retry-delay", "0", "lock:job", "--", "sh", "-c",
                        f'[ "$RLOCK_ATTEMPT" = 1 ] && exit 3; touch {started}; exec sleep 30'])
        wait_until(lambda: os.path.exists(started), 10, "the second attempt")
        j = json.loads(self.check("--json").stdout)
        self.assertEqual((j["runs_in_window"], j["failures_since_count"], j["last_run"]),
                         (0, 0, None))
        self.assertEqual(len(j["running"]), 1)
        status = self.run_rlock(["status", "lock:job", "--json"])
        self.assertIsNone(json.loads(status.stdout)["locks"][0]["last_run"])
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)


class CheckRedlock(RedisTestCase):
    """Under Redlock each run's history entry goes to one node, the first that answers its
    writer: check reads every node."""

    def test_a_success_recorded_on_any_node_counts(self):
        other, third = RedisServer(), RedisServer()
        self.addCleanup(other.stop)
        self.addCleanup(third.stop)
        urls = ["--redis", self.server.url, "--redis", other.url, "--redis", third.url]
        secs, micros = other.cmd("TIME")
        ended = int(secs) * 1000 + int(micros) // 1000 - 60000
        other.cmd("XADD", "{lock:job}:rlock:history", f"{ended}-0", "host", "web-7", "pid", "1",
                  "user", "ops", "cmd", "job", "since", "2026-01-01T00:00:00.000Z", "fence", "1",
                  "waited_ms", "0", "held_ms", "10", "status", "0", "end", "exited")
        r = run_rlock(["check", *urls, "lock:job", "--every", "1h"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("on web-7", r.stdout)
        # A node that does not answer is named; the others, a quorum, still count.
        other.stop()
        r = run_rlock(["check", *urls, "lock:job", "--every", "1h"])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("no answer from redis://127.0.0.1:", r.stdout)
