"""rlock pause and resume: a paused key runs nothing on any host, says so in one line, and
leaves nothing behind when the pause ends (man rlock, "pause"). Three hosts simulated with
RLOCK_HOSTNAME."""
import json
import os
import pwd
import signal
import unittest

from harness import RedisTestCase, rlock_env, wait_until

KEY = "lock:job"
PAUSE = "{lock:job}:rlock:pause"
ME = pwd.getpwuid(os.geteuid()).pw_name


class Pause(RedisTestCase):

    def host(self, name):
        return rlock_env(self.server, RLOCK_HOSTNAME=name, T=self.tmp)

    def ran(self):
        try:
            with open(self.path("ran")) as f:
                return f.read().split()
        except FileNotFoundError:
            return []

    def run_job(self, host, *args):
        return self.run_rlock(["run", *args, KEY, "-c", f'echo {host} >> "$T/ran"'],
                              env=self.host(host))

    def test_a_paused_key_runs_nothing_on_any_host_until_resumed(self):
        r = self.run_rlock(["pause", KEY, "--for", "10m", "--reason", "db maintenance"],
                           env=self.host("ops-1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"paused by {ME}@ops-1 until ", r.stdout)
        for host, args, status in (("web-1", [], 75), ("web-2", ["-E", "0"], 0),
                                   ("web-3", ["--limit", "2"], 75), ("web-1", ["--shared"], 75),
                                   ("web-2", ["--record-skips"], 75)):
            r = self.run_job(host, *args)
            self.assertEqual(r.returncode, status, (host, args, r.stderr))
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertRegex(lines[0], rf"^rlock: {KEY}: paused by {ME}@ops-1 until \S+, "
                                       r"[\dms.]+ from now: db maintenance$")
        self.assertEqual(self.ran(), [])
        self.assertIsNone(self.server.cmd("GET", KEY))
        # What the operator views say.
        r = self.run_rlock(["status", KEY])
        self.assertIn(f"paused by {ME}@ops-1 until", r.stdout)
        r = self.run_rlock(["inspect", "--json", KEY])
        pause = json.loads(r.stdout)["pause"]
        self.assertEqual((pause["by"], pause["reason"]), (f"{ME}@ops-1", "db maintenance"))
        self.assertGreater(pause["ttl_ms"], 500_000)
        # No run is due: check is no alarm, though nothing ever succeeded.
        r = self.run_rlock(["check", KEY, "--every", "5m"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("paused by", r.stdout)
        r = self.run_rlock(["history", "--json", KEY])
        skip = json.loads(r.stdout)["runs"][0]
        self.assertEqual((skip["end"], skip["by"], skip["reason"], skip["exit_status"]),
                         ("paused", f"{ME}@ops-1", "db maintenance", 75))
        # Resumed: runs go again, and check is an alarm again.
        r = self.run_rlock(["resume", KEY], env=self.host("ops-1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("resumed", r.stdout)
        self.assertIsNone(self.server.cmd("GET", PAUSE))
        self.assertEqual(self.run_rlock(["check", KEY, "--every", "5m"]).returncode, 1)
        self.assertEqual(self.run_job("web-3").returncode, 0)
        self.assertEqual(self.ran(), ["web-3"])
        r = self.run_rlock(["resume", KEY])
        self.assertEqual((r.returncode, r.stdout), (1, KEY + ": not paused; nothing changed\n"))

    def test_a_waiting_run_waits_through_the_pause_and_resume_wakes_it(self):
        self.assertEqual(self.run_rlock(["pause", KEY, "--for", "10m"]).returncode, 0)
        waiter = self.start(["run", "--wait", "1m", KEY, "-c", 'echo waiter >> "$T/ran"'],
                            env=self.host("web-2"))
        wait_until(lambda: self.server.cmd("ZCARD", "{lock:job}:rlock:queue") == 1, 10,
                   "the waiter in the queue")
        self.assertEqual(self.ran(), [])
        self.assertEqual(self.run_rlock(["resume", KEY]).returncode, 0)
        # Woken by the resume, not by its next look (it blocks until the pause's end, 10m).
        self.assertEqual(waiter.wait(timeout=10), 0, waiter.stderr.read())
        self.assertEqual(self.ran(), ["waiter"])

    def test_watch_tells_the_resume_before_the_waiter_it_let_take_the_lock(self):
        self.assertEqual(self.run_rlock(["pause", KEY, "--for", "10m"]).returncode, 0)
        watch = self.start(["watch", "--json", KEY])
        events = []

        def next_event():
            events.append(json.loads(watch.stdout.readline())["event"])
            return events[-1]
        wait_until(lambda: next_event() == "state", 10, "watch's first state")
        waiter = self.start(["run", "--wait", "1m", KEY, "--", "sleep", "30"],
                            env=self.host("web-2"))
        wait_until(lambda: next_event() == "queued", 10, "the waiter in the queue")
        self.assertEqual(self.run_rlock(["resume", KEY]).returncode, 0)
        wait_until(lambda: next_event() == "taken", 10, "the waiter taking the lock")
        self.assertIn("resumed", events)
        self.assertLess(events.index("resumed"), events.index("taken"), events)
        waiter.send_signal(signal.SIGTERM)
        waiter.wait(timeout=10)

    def test_every_operator_action_is_in_the_history_and_watch_with_who_and_why(self):
        # A --once-per run, then four operators' actions from three hosts, watched from a fourth.
        self.assertEqual(self.run_job("web-1", "--once-per", "day").returncode, 0)
        watch = self.start(["watch", "--json", KEY], env=self.host("web-4"))
        seen = []

        def event(name):
            e = json.loads(watch.stdout.readline())
            seen.append(e)
            return e if e["event"] == name else None
        wait_until(lambda: event("state"), 10, "watch's first state")
        for host, args, name in (
                ("ops-1", ["pause", KEY, "--for", "10m", "--reason", "db $(upgrade)"], "paused"),
                ("ops-2", ["resume", KEY, "--reason", "db is back"], "resumed"),
                ("ops-2", None, "action"),
                ("ops-3", ["reset-period", KEY, "--once-per", "day", "--reason",
                           "rerun after the fix"], "action")):
            if args:
                r = self.run_rlock(args, env=self.host(host))
                self.assertEqual(r.returncode, 0, r.stderr)
            got = wait_until(lambda: event(name), 15, f"watch's {name}")
        self.assertEqual((got["run"]["end"], got["run"]["by"]), ("period-reset", f"{ME}@ops-3"))
        # The pause's own event names who and why; the resume is the state's change, then the
        # action with who and why.
        paused = next(e for e in seen if e["event"] == "paused")
        self.assertEqual((paused["pause"]["by"], paused["pause"]["reason"]),
                         (f"{ME}@ops-1", "db $(upgrade)"))
        resume = next(e for e in seen if e["event"] == "action")
        self.assertEqual((resume["run"]["end"], resume["run"]["by"], resume["run"]["reason"]),
                         ("resume", f"{ME}@ops-2", "db is back"))
        # A holder gone without a word, freed at once by a fourth operator.
        self.server.cmd("SET", KEY, "rlock/1 0123456789abcdef0123456789abcdef host=web-9 pid=1 "
                        "user=x since=2026-12-01T00:00:00.000Z cmd=job ttl=60000 fence=42",
                        "PX", "60000")
        r = self.run_rlock(["release", KEY, "--force", "--now", "--reason", "web-9 is dead"],
                           env=self.host("ops-1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_rlock(["history", "--json", KEY])
        actions = [(e["end"], e["by"], e["reason"], e["fence"], e["exit_status"])
                   for e in json.loads(r.stdout)["runs"]][:4]
        self.assertEqual(actions, [
            ("forced-release", f"{ME}@ops-1", "web-9 is dead", 42, None),
            ("period-reset", f"{ME}@ops-3", "rerun after the fix", 0, None),
            ("resume", f"{ME}@ops-2", "db is back", 0, None),
            ("pause", f"{ME}@ops-1", "db $(upgrade)", 0, None)])
        text = self.run_rlock(["history", KEY]).stdout.splitlines()
        self.assertRegex(text[1], rf"  42  +released by force by {ME}@ops-1: web-9 is dead$")
        self.assertRegex(text[3], rf"resumed by {ME}@ops-2: db is back$")
        self.assertRegex(text[4], rf"paused by {ME}@ops-1 until \S+Z: db \$\(upgrade\)$")
        # watch: the forced release from the history (--now leaves no tombstone to see).
        wait_until(lambda: event("action") and seen[-1]["run"]["end"] == "forced-release", 15,
                   "watch's forced release")
        names = [e["event"] for e in seen]
        self.assertEqual([n for n in names if n in ("paused", "resumed", "action")],
                         ["paused", "resumed", "action", "action", "action"], names)

    def test_a_pause_longer_than_a_day_is_said(self):
        r = self.run_rlock(["pause", KEY, "--for", "23h"])
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        r = self.run_rlock(["pause", KEY, "--for", "400d", "--reason", "disk swap"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"{KEY}: paused for 400d, longer than a day: no run starts until then "
                      f"(rlock resume {KEY} ends it sooner)", r.stderr)
        self.assertGreater(self.server.cmd("PTTL", PAUSE), 399 * 86400 * 1000)

    def test_resume_wakes_every_waiter_of_a_semaphore(self):
        # Three places, three waiters: all get in at the resume, not one then the others at
        # the pause's end (10m).
        self.assertEqual(self.run_rlock(["pause", KEY, "--for", "10m"]).returncode, 0)
        waiters = [self.start(["run", "--limit", "3", "--wait", "1m", KEY, "-c",
                               f'echo web-{i} >> "$T/ran"; sleep 4'], env=self.host(f"web-{i}"))
                   for i in range(3)]
        wait_until(lambda: self.server.cmd("ZCARD", "{lock:job}:rlock:queue") == 3, 10,
                   "three waiters")
        self.assertEqual(self.run_rlock(["resume", KEY]).returncode, 0)
        # Together: one woken alone would let the next in only at its release, 4s on.
        wait_until(lambda: len(self.ran()) == 3, 3, "the three runs")
        for w in waiters:
            self.assertEqual(w.wait(timeout=10), 0)

    def test_a_pause_ends_by_itself_and_leaves_nothing(self):
        self.assertEqual(self.run_rlock(["pause", KEY, "--for", "1s"]).returncode, 0)
        self.assertEqual(self.run_job("web-1").returncode, 75)
        # A waiter blocks until the pause's end, then runs.
        r = self.run_job("web-2", "--wait", "30s")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ran(), ["web-2"])
        # The pause was its one key, and it expired with it.
        self.assertEqual(self.server.cmd("KEYS", "*pause*"), [])

    def test_a_run_already_going_is_not_touched(self):
        holder = self.start(["run", KEY, "-c", 'echo $$ > "$T/started"; read x; exit 0'],
                            env=self.host("web-1"), stdin=__import__("subprocess").PIPE)
        self.wait_file("started")
        r = self.run_rlock(["pause", KEY, "--until", "23:59"], env=self.host("ops-1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("the run that holds it goes on (rlock stop lock:job ends it)", r.stdout)
        self.assertIsNone(holder.poll())
        holder.stdin.close()
        self.assertEqual(holder.wait(timeout=10), 0)
        self.assert_no_lock(KEY)
        self.assertIsNotNone(self.server.cmd("GET", PAUSE))
        self.assertEqual(self.run_job("web-2").returncode, 75)

    def test_bad_input_changes_nothing(self):
        for args, what in (([], "--for D or --until TIME"),
                           (["--for", "1m", "--until", "10:00"], "--for D or --until TIME"),
                           (["--for", "0s"], "--for"), (["--for", "soon"], "--for"),
                           (["--until", "25:99"], "--until"), (["--until", "tomorrow"], "--until"),
                           (["--for", "1m", "--reason", "x" * 501], "--reason")):
            r = self.run_rlock(["pause", KEY] + args)
            self.assertEqual(r.returncode, 64, (args, r.stderr))
            self.assertIn(what, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        for until, what in (("2020-01-01T00:00:00Z", "is past"), ("2027-02-30 10:00", "not a time"),
                            ("2026-06-31T10:00:00Z", "not a time"), ("2040-01-01T00:00:00Z", "too far")):
            r = self.run_rlock(["pause", KEY, "--until", until])
            self.assertEqual(r.returncode, 64, r.stderr)
            self.assertIn(what, r.stderr)
        for args in (["--for", "3661d"], ["--for", "1m", "--until", "10:00"]):
            r = self.run_rlock(["pause", KEY] + args)
            self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("too long", self.run_rlock(["pause", KEY, "--for", "3661d"]).stderr)
        self.assertIn("not both", self.run_rlock(["pause", KEY, "--for", "1m", "--until", "10:00"]).stderr)
        self.assertEqual(self.server.cmd("DBSIZE"), 0)


if __name__ == "__main__":
    unittest.main()
