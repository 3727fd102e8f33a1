"""Cron-grade guarantees: --once-per across hosts and periods, and the run history."""
import json
import os
import signal
import time
import unittest
from datetime import datetime
from zoneinfo import ZoneInfo

from harness import RedisTestCase, rlock_env, wait_until


def stamp_ms(text):
    """An RFC 3339 time as rlock writes it (2026-11-30T04:00:01.515Z), in ms since the epoch."""
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000)


def duration_ms(text):
    """A duration as rlock prints a short one (308ms, 1.2s), in ms."""
    if text.endswith("ms"):
        return int(text[:-2])
    return round(float(text[:-1]) * 1000)


class OncePer(RedisTestCase):
    def run_as(self, host, args, **kw):
        return self.run_rlock(args, env=rlock_env(self.server, RLOCK_HOSTNAME=host), **kw)

    def start_job(self, host, args, key):
        """rlock run ARGS KEY as HOST, of a job that sleeps; returned once the job has started
        (so its period is claimed)."""
        started = self.path(f"started-{host}-{key}")
        p = self.start(["run", *args, key, "--", "sh", "-c", f"touch {started}; sleep 30"],
                       env=rlock_env(self.server, RLOCK_HOSTNAME=host))
        wait_until(lambda: os.path.exists(started), 10, f"{host}'s run of {key}")
        return p

    def stop(self, p):
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)

    def server_ms(self):
        secs, micros = self.server.cmd("TIME")
        return int(secs) * 1000 + int(micros) // 1000

    def test_two_hosts_the_same_day_run_it_once(self):
        marker = self.path("runs")
        job = ["--once-per", "1d", "report", "--", "sh", "-c", f"echo $RLOCK_FENCE >> {marker}"]
        first = self.run_as("web-1", ["run"] + job)
        self.assertEqual(first.returncode, 0, first.stderr)
        second = self.run_as("web-2", ["run"] + job)
        self.assertEqual(second.returncode, 75, second.stderr)
        self.assertIn("already run this period", second.stderr)
        self.assertIn("on web-1", second.stderr)
        self.assertIn("it succeeded", second.stderr)
        with open(marker) as f:  # one run: the first fence drawn
            self.assertEqual(len(f.read().split()), 1)
        # While it still runs, the other host is told who holds it; -E 0 makes that success.
        self.server.cmd("FLUSHALL")
        holder = self.start(["run", "--once-per", "1d", "report", "--", "sleep", "30"],
                            env=rlock_env(self.server, RLOCK_HOSTNAME="web-1"))
        wait_until(lambda: self.server.cmd("GET", "report"), 10, "the first run")
        busy = self.run_as("web-2", ["run", "-E", "0", "--once-per", "1d", "report", "--", "true"])
        self.assertEqual(busy.returncode, 0, busy.stderr)
        self.assertIn("held by web-1", busy.stderr)
        os.killpg(holder.pid, signal.SIGTERM)
        holder.wait(timeout=10)

    def test_a_late_comer_that_finds_another_checking_is_told_the_period_has_run(self):
        # web-1 ran today's job; web-2, late, holds the lock for the moment it takes to find
        # that out (acquire stands in for that moment); web-3, as late, finds the lock busy.
        job = ["--once-per", "1d", "report", "--", "true"]
        self.assertEqual(self.run_as("web-1", ["run"] + job).returncode, 0)
        token = self.run_as("web-2", ["acquire", "report"])
        self.assertEqual(token.returncode, 0, token.stderr)
        late = self.run_as("web-3", ["run"] + job)
        self.assertEqual(late.returncode, 75, late.stderr)
        self.assertIn("already run this period", late.stderr)
        self.assertIn("on web-1", late.stderr)
        self.assertNotIn("held by", late.stderr)
        self.assertEqual(self.run_as("web-2", ["release", "report", "--token",
                                               token.stdout.strip()]).returncode, 0)

    def test_retry_failed(self):
        job = ["--once-per", "day", "report", "--", "sh", "-c"]
        self.assertEqual(self.run_as("web-1", ["run"] + job + ["exit 3"]).returncode, 3)
        plain = self.run_as("web-2", ["run"] + job + ["exit 0"])
        self.assertEqual(plain.returncode, 75)
        self.assertIn("exited with status 3; rlock reset-period would let it run again "
                      "(--retry-failed: after every failure)", plain.stderr)
        retried = self.run_as("web-2", ["run", "--retry-failed"] + job + ["exit 0"])
        self.assertEqual(retried.returncode, 0, retried.stderr)
        again = self.run_as("web-3", ["run", "--retry-failed"] + job + ["exit 0"])
        self.assertEqual(again.returncode, 75)
        self.assertIn("on web-2", again.stderr)
        self.assertIn("it succeeded", again.stderr)

    def test_reset_period_lets_the_job_run_again_and_is_recorded(self):
        job = ["--once-per", "day", "report", "--", "true"]
        self.assertEqual(self.run_as("web-1", ["run"] + job).returncode, 0)
        done = self.run_as("web-2", ["run"] + job)
        self.assertEqual(done.returncode, 75)
        self.assertIn("rlock reset-period would let it run again", done.stderr)
        # The period must be the job's: another period has no run to forget.
        other = self.run_as("ops-1", ["reset-period", "report", "--once-per", "hour"])
        self.assertEqual(other.returncode, 1, other.stderr)
        self.assertIn("no run recorded for this period", other.stdout)
        reset = self.run_as("ops-1", ["reset-period", "report", "--once-per", "day"])
        self.assertEqual(reset.returncode, 0, reset.stderr)
        self.assertIn("forgot this period's run", reset.stdout)
        self.assertIn("on web-1", reset.stdout)
        again = self.run_as("web-2", ["run"] + job)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(self.run_as("web-3", ["run"] + job).returncode, 75)
        runs = json.loads(self.run_rlock(["history", "--json", "report"]).stdout)["runs"]
        self.assertEqual([(r["holder"]["host"], r["end"]) for r in runs],
                         [("web-2", "exited"), ("ops-1", "period-reset"), ("web-1", "exited")])
        text = self.run_rlock(["history", "report"]).stdout
        self.assertIn("period reset by ", text)
        # Nothing to forget now that the period's run is recorded again? There is: web-2's.
        self.assertEqual(self.run_as("ops-1", ["reset-period", "report", "--once-per", "day"])
                         .returncode, 0)
        self.assertEqual(self.run_as("ops-1", ["reset-period", "report", "--once-per", "day"])
                         .returncode, 1)

    def test_reset_period_refuses_while_the_run_holds_the_lock(self):
        holder = self.start_job("web-1", ["--once-per", "day"], "report")
        slot = [k for k in self.server.cmd("KEYS", "*once*")]
        r = self.run_as("ops-1", ["reset-period", "report", "--once-per", "day"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("still running on web-1", r.stderr)
        self.assertEqual([k for k in self.server.cmd("KEYS", "*once*")], slot)
        self.stop(holder)

    def test_reset_period_knows_the_run_by_its_fence(self):
        # A semaphore's run holds no plain key: still running all the same.
        holder = self.start_job("web-1", ["--limit", "2", "--once-per", "day"], "sem")
        r = self.run_as("ops-1", ["reset-period", "sem", "--once-per", "day"])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("still running on web-1", r.stderr)
        self.stop(holder)
        # A run that died leaves its period "running"; another rlock holding the key now is not
        # that run, and the dead one is forgotten.
        dead = self.start_job("web-9", ["--ttl", "1s", "--once-per", "day"], "report")
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait()
        wait_until(lambda: not self.server.cmd("GET", "report"), 10, "its lock to expire")
        other = self.start_job("web-1", [], "report")
        r = self.run_as("ops-1", ["reset-period", "report", "--once-per", "day"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("on web-9", r.stdout)
        self.assertIn("never reported its end", r.stdout)
        self.stop(other)

    def test_a_semaphore_run_in_progress_is_not_taken_for_a_lost_one(self):
        # --limit 2: a second host gets a place while the period's run still runs. It must not
        # take that run for one that died, and so must not run the job again (--retry-failed).
        first = self.start_job("web-1", ["--limit", "2", "--once-per", "day"], "sem")
        marker = self.path("second")
        r = self.run_as("web-2", ["run", "--limit", "2", "--once-per", "day", "--retry-failed",
                                  "sem", "--", "touch", marker])
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertIn("on web-1", r.stderr)
        self.assertIn("it is still running", r.stderr)
        self.assertFalse(os.path.exists(marker))
        self.stop(first)

    def test_reset_period_needs_the_period(self):
        r = self.run_rlock(["reset-period", "report"])
        self.assertEqual(r.returncode, 64)
        self.assertIn("needs --once-per", r.stderr)

    def test_a_run_that_vanished_counts_as_lost(self):
        holder = self.start_job("web-1", ["--ttl", "1s", "--once-per", "1d"], "report")
        os.kill(holder.pid, signal.SIGKILL)  # its host dies: no end recorded
        holder.wait()
        r = self.run_as("web-2", ["run", "--wait", "10s", "--once-per", "1d", "report", "--",
                                  "true"])
        self.assertEqual(r.returncode, 75)
        self.assertIn("never reported its end (lost)", r.stderr)
        r = self.run_as("web-2", ["run", "--retry-failed", "--once-per", "1d", "report", "--",
                                  "true"])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_next_period_runs_again(self):
        # Both runs must fall in one 2s window of the server's clock; under a loaded machine
        # they may straddle a boundary, and then the pair is simply tried again.
        for attempt in range(5):
            job = ["run", "--once-per", "2s", f"tick{attempt}", "--", "true"]
            wait_until(lambda: self.server_ms() % 2000 < 300, 5, "the start of a 2s window")
            window = self.server_ms() // 2000
            first, second = self.run_rlock(job), self.run_rlock(job)
            if self.server_ms() // 2000 != window:
                continue
            self.assertEqual(first.returncode, 0, first.stderr)
            self.assertEqual(second.returncode, 75, second.stderr)
            wait_until(lambda: self.server_ms() // 2000 > window, 5, "the next window")
            self.assertEqual(self.run_rlock(job).returncode, 0)
            return
        self.fail("no two runs fitted in one 2s window in five tries")

    def test_calendar_day_in_a_time_zone(self):
        r = self.run_rlock(["run", "--once-per", "day", "--tz", "Pacific/Kiritimati", "k", "--",
                            "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        day = datetime.fromtimestamp(self.server_ms() / 1000,
                                     ZoneInfo("Pacific/Kiritimati")).strftime("%Y-%m-%d")
        slot = "{k}:rlock:once:" + day
        self.assertEqual(self.server.cmd("HGET", slot, "status"), "0")
        # It lives until the end of that day there, plus a margin; not days.
        self.assertLessEqual(self.server.cmd("PTTL", slot), 25 * 3600 * 1000)


class History(RedisTestCase):
    def history(self, key, n=20):
        r = self.run_rlock(["history", "--json", "-n", str(n), key])
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["runs"]

    def test_every_run_with_its_end(self):
        self.assertEqual(self.run_rlock(["run", "k", "--", "true"]).returncode, 0)
        self.assertEqual(self.run_rlock(["run", "k", "--", "sh", "-c", "exit 3"]).returncode, 3)
        self.assertEqual(self.run_rlock(["run", "--max-run", "200ms", "k", "--", "sleep", "10"])
                         .returncode, 124)
        self.assertEqual(self.run_rlock(["run", "k", "--", "sh", "-c", "kill -TERM $$"])
                         .returncode, 143)
        lost = self.start(["run", "--ttl", "1s", "k", "--", "sleep", "30"])
        wait_until(lambda: self.server.cmd("GET", "k"), 10, "the holder")
        self.server.cmd("DEL", "k")
        self.assertEqual(lost.wait(timeout=10), 76)
        busy_holder = self.start(["run", "k", "--", "sleep", "30"])
        wait_until(lambda: self.server.cmd("GET", "k"), 10, "the holder")
        self.assertEqual(self.run_rlock(["run", "--record-skips", "k", "--", "true"]).returncode, 75)
        self.assertEqual(self.run_rlock(["run", "k", "--", "true"]).returncode, 75)  # unrecorded
        os.killpg(busy_holder.pid, signal.SIGTERM)
        busy_holder.wait(timeout=10)

        runs = self.history("k")
        got = [(r["end"], r["exit_status"]) for r in runs]
        self.assertEqual(got, [("signalled", 143), ("busy", 75), ("lost", 76),
                               ("signalled", 143), ("max-run", 124), ("exited", 3),
                               ("exited", 0)])
        for r in runs:
            self.assertTrue(r["holder"]["host"])
            self.assertIn("acquired_at", r)
        fences = [r["fence"] for r in runs if r["end"] != "busy"]
        self.assertEqual(fences, sorted(fences, reverse=True))
        self.assertGreaterEqual(runs[-2]["held_ms"], 0)

        text = self.run_rlock(["history", "k"]).stdout.splitlines()
        self.assertTrue(text[0].startswith("ACQUIRED AT"))
        self.assertIn("exit 3", "\n".join(text))
        status = self.run_rlock(["status", "k"])
        self.assertIn("last run: signalled (143)", status.stdout)
        inspect = json.loads(self.run_rlock(["inspect", "--json", "k"]).stdout)
        self.assertEqual(inspect["last_run"]["end"], "signalled")

    def test_an_exit_above_128_is_an_exit_and_a_signal_a_signal(self):
        """The wait status says which it was: `exit 200` is no signal 72, whatever its number."""
        metrics = self.path("rlock.prom")
        for code in (130, 200, 255):
            r = self.run_rlock(["run", "--metrics-file", metrics, "k", "--", "sh", "-c",
                                f"exit {code}"])
            self.assertEqual(r.returncode, code, r.stderr)
        killed = self.run_rlock(["run", "--metrics-file", metrics, "k", "--", "sh", "-c",
                                 "kill -INT $$"])
        self.assertEqual(killed.returncode, 130)
        got = [(r["end"], r["exit_status"]) for r in self.history("k")]
        self.assertEqual(got, [("signalled", 130), ("exited", 255), ("exited", 200),
                               ("exited", 130)])
        text = self.run_rlock(["history", "k"]).stdout
        self.assertIn("exit 200", text)
        self.assertNotIn("signalled (200)", text)
        with open(metrics) as f:
            prom = f.read()
        self.assertIn('rlock_runs_total{key="k",end="failure"} 3', prom)
        self.assertIn('rlock_runs_total{key="k",end="signalled"} 1', prom)
        # check judges an exit 255 a failed run, like any non-zero exit.
        self.assertEqual(self.run_rlock(["check", "k", "--every", "1h"]).returncode, 1)

    def test_capped_at_history_length(self):
        for _ in range(8):
            self.assertEqual(self.run_rlock(["run", "--history-length", "5", "k", "--", "true"])
                             .returncode, 0)
        self.assertEqual(self.server.cmd("XLEN", "{k}:rlock:history"), 5)
        self.assertEqual(len(self.history("k")), 5)
        self.run_rlock(["run", "--history-length", "0", "other", "--", "true"])
        self.assertEqual(self.server.cmd("EXISTS", "{other}:rlock:history"), 0)

    def test_a_history_that_cannot_be_written_warns_and_the_job_runs(self):
        self.server.cmd("SET", "{k}:rlock:history", "not a stream")
        marker = self.path("ran")
        r = self.run_rlock(["run", "k", "--", "touch", marker])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(marker))
        warnings = [l for l in r.stderr.splitlines() if "could not record the run" in l]
        self.assertEqual(len(warnings), 1, r.stderr)
        self.assert_no_lock("k")
        self.assertEqual(self.run_rlock(["status", "k"]).returncode, 1)  # still readable

    def test_a_run_is_recorded_once_across_a_frozen_server(self):
        # Redis frozen mid-run: the lease runs out (76), and every release and history write
        # times out while the server still has them to run when it wakes. The entry is sent
        # more than once (with the release, then on its own); each is run then, and only the
        # first may add it.
        p = self.start(["run", "--ttl", "1s", "--command-timeout", "300ms", "k", "--",
                        "sleep", "60"])
        wait_until(lambda: self.server.cmd("GET", "k"), 10, "the lock taken")
        self.server.freeze()
        try:
            self.assertEqual(p.wait(timeout=30), 76)
        finally:
            self.server.thaw()
        stderr = p.stderr.read()
        self.assertIn("history entry may not have been recorded (", stderr)
        # Once the server has read what rlock's closed connections left, all of it has run.
        client = self.server.client()
        self.addCleanup(client.close)
        wait_until(lambda: client("CLIENT", "LIST").count("\n") == 1, 10,
                   "the server to be done with rlock's connections")
        self.assertEqual(self.server.cmd("XLEN", "{k}:rlock:history"), 1)
        self.assertEqual([run["end"] for run in self.history("k")], ["lost"])

    def test_each_attempt_with_its_own_start_and_length(self):
        r = self.run_rlock(["run", "--retry", "3", "--retry-delay", "0", "k", "--", "sh", "-c",
                            "sleep 0.3; exit 1"])
        self.assertEqual(r.returncode, 1, r.stderr)
        runs = self.history("k")
        self.assertEqual([run["attempt"] for run in runs], [4, 3, 2, 1])
        self.assertEqual(len({run["fence"] for run in runs}), 1)
        # The run's: when the lock was taken, and how long it was held until each attempt's end.
        self.assertEqual(len({run["acquired_at"] for run in runs}), 1)
        total = runs[0]["held_ms"]
        # Each attempt's own: the first from the lock's taking, the others from their start,
        # one after another; each held about its 0.3 s, bounded widely.
        oldest_first = runs[::-1]
        self.assertEqual(oldest_first[0]["attempt_started_at"], oldest_first[0]["acquired_at"])
        starts = [stamp_ms(run["attempt_started_at"]) for run in oldest_first]
        helds = [run["attempt_held_ms"] for run in oldest_first]
        for i, held in enumerate(helds):
            self.assertGreaterEqual(held, 250, helds)
            self.assertLess(held, total * 3 // 4, (helds, total))
            if i > 0:
                self.assertGreaterEqual(starts[i], starts[i - 1] + helds[i - 1] - 20, starts)
        self.assertGreaterEqual(total, sum(helds) - 20, (helds, total))
        # The text: a line each, with that attempt's start and length.
        lines = self.run_rlock(["history", "k"]).stdout.splitlines()[1:]
        self.assertEqual(len(lines), 4, lines)
        self.assertEqual([line.split()[0] for line in lines],
                         [run["attempt_started_at"] for run in runs])
        shown = [duration_ms(line.split()[3]) for line in lines]
        for held, run in zip(shown, runs):
            self.assertAlmostEqual(held, run["attempt_held_ms"], delta=run["attempt_held_ms"] // 10)
            self.assertLess(held, total * 3 // 4)
        self.assertTrue(lines[0].endswith("exit 1, attempt 4"), lines[0])

    def test_an_attempt_an_older_rlock_recorded_shows_the_runs_start_and_held(self):
        # Written before attempts had their own start and length: the run's are shown.
        self.server.cmd("XADD", "{k}:rlock:history", "*", "host", "old-1", "pid", "7", "user",
                        "ops", "cmd", "job", "since", "2026-11-30T04:00:01.515Z", "fence", "3",
                        "waited_ms", "0", "held_ms", "2500", "status", "1", "end", "exited",
                        "attempt", "2")
        run = self.history("k")[0]
        self.assertEqual((run["attempt"], run["acquired_at"], run["held_ms"]),
                         (2, "2026-11-30T04:00:01.515Z", 2500))
        self.assertEqual((run["attempt_started_at"], run["attempt_held_ms"]), (None, None))
        line = self.run_rlock(["history", "k"]).stdout.splitlines()[1].split()
        self.assertEqual((line[0], line[3]), ("2026-11-30T04:00:01.515Z", "2.5s"))

    def test_no_history_yet(self):
        r = self.run_rlock(["history", "never"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.history("never"), [])


if __name__ == "__main__":
    unittest.main()
