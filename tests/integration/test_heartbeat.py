"""--heartbeat-file F --stale-after D: a command that stops touching F is stopped as hung (its
whole process group, as on a loss), the lock is given back and rlock exits 79; a command that
keeps touching it runs to its end."""
import json
import os
import time
import unittest

from harness import RedisTestCase, pid_alive, read_pids, rlock_env, wait_until

# Touches the heartbeat BEATS times, a beat every 0.1 s, then (unless HANG is empty) hangs
# ignoring TERM, with a child in its group; both pids go to PIDS.
BEAT_THEN_HANG = """
sleep 30 & c=$!; echo $c >> {pids}
echo $$ >> {pids}
i=0; while [ $i -lt {beats} ]; do touch "$RLOCK_HEARTBEAT_FILE"; sleep 0.1; i=$((i+1)); done
[ -n "{hang}" ] || {{ kill $c; exit 0; }}
trap '' TERM
while :; do sleep 0.05; done
"""


class Heartbeat(RedisTestCase):
    def beat_then_hang(self, beats, hang=True, args=()):
        pids = self.path("pids")
        script = BEAT_THEN_HANG.format(pids=pids, beats=beats, hang="1" if hang else "")
        return self.start(["run", "--ttl", "3s", "--heartbeat-file", self.path("beat"), *args,
                           "k", "--", "sh", "-c", script]), pids

    def test_a_hung_command_is_stopped_and_the_lock_given_back(self):
        # It beats for a while, then hangs ignoring TERM: KILL after --kill-after stops it.
        p, pids = self.beat_then_hang(5, args=["--stale-after", "1s", "--kill-after", "500ms"])
        child, script = wait_until(lambda: len(read_pids(pids)) == 2 and read_pids(pids), 10,
                                   "the pids")
        started = time.monotonic()
        self.assertEqual(p.wait(timeout=20), 79)
        # Stopped within D + kill-after of its last beat (wide bounds: after D, well before the
        # 3 s ttl would have mattered had it been renewed for ever).
        self.assertLess(time.monotonic() - started, 10)
        self.assertFalse(pid_alive(script) or pid_alive(child), "the hung group still runs")
        self.assert_no_lock("k")
        stderr = p.stderr.read()
        self.assertIn("rlock: error: k: the command has not touched " + self.path("beat") +
                      " for 1s (--stale-after); stopping it as hung", stderr)
        self.assertIn("sending KILL", stderr)
        runs = json.loads(self.run_rlock(["history", "--json", "k"]).stdout)["runs"]
        self.assertEqual([(r["end"], r["exit_status"]) for r in runs], [("hung", 79)])
        # The next host takes the lock at once.
        self.assertEqual(self.run_rlock(["run", "k", "--", "true"]).returncode, 0)

    def test_a_command_that_keeps_beating_runs_to_its_end(self):
        # 30 beats, 3 s: three times --stale-after, each beat well within it.
        p, _ = self.beat_then_hang(30, hang=False, args=["--stale-after", "1s"])
        self.assertEqual(p.wait(timeout=30), 0, p.stderr.read())
        self.assert_no_lock("k")

    def test_a_command_that_never_beats_is_stopped_from_its_start(self):
        p = self.start(["run", "--heartbeat-file", self.path("beat"), "--stale-after", "500ms",
                        "k", "--", "sleep", "30"])
        self.assertEqual(p.wait(timeout=20), 79)
        self.assert_no_lock("k")

    def test_a_busy_run_of_the_same_job_does_not_beat_for_it(self):
        # cron fires again on the same host while the job hangs: the runs that find the lock
        # busy must not touch the hung job's heartbeat file.
        args = ["run", "--heartbeat-file", self.path("beat"), "--stale-after", "1500ms", "k",
                "--"]
        p = self.start(args + ["sleep", "30"])
        wait_until(lambda: self.server.cmd("GET", "k"), 10, "the lock")
        give_up = time.monotonic() + 10
        while p.poll() is None and time.monotonic() < give_up:
            status = self.run_rlock(args + ["true"]).returncode
            if status == 0:
                # The hung job was stopped and gave the lock back between the look and this
                # run (a slow sanitizer build): the run took the free lock, as it should.
                self.assertEqual(p.wait(timeout=10), 79)
                return
            self.assertEqual(status, 75)
            time.sleep(0.2)  # a cron line that fires often; not a synchronisation
        # Checked before the busy runs stop: once they stop, a kept-alive job is stopped too.
        self.assertIsNotNone(p.poll(), "the busy runs kept the hung job alive for 10s")
        self.assertEqual(p.wait(), 79)

    def test_a_copy_with_an_old_mtime_is_a_beat(self):
        # cp -p / rsync -t / a clock step: the file changed, with an mtime from the past.
        template = self.make_file("template")
        os.utime(template, (time.time() - 3600, time.time() - 3600))
        script = (f'while :; do cp -p {template} "$RLOCK_HEARTBEAT_FILE.new" && '
                  'mv "$RLOCK_HEARTBEAT_FILE.new" "$RLOCK_HEARTBEAT_FILE"; sleep 0.2; done')
        p = self.start(["run", "--heartbeat-file", self.path("beat"), "--stale-after", "1s",
                        "--max-run", "3s", "k", "--", "sh", "-c", script])
        self.assertEqual(p.wait(timeout=20), 124, p.stderr.read())  # --max-run, not hung

    def test_what_the_command_leaves_running_must_beat_too(self):
        # The lock is held for leftovers (--leftovers wait); a hung one is stopped all the same.
        pids = self.path("pids")
        p = self.start(["run", "--heartbeat-file", self.path("beat"), "--stale-after", "500ms",
                        "k", "--", "sh", "-c", f"sleep 30 & echo $! > {pids}; exit 0"])
        leftover = wait_until(lambda: read_pids(pids), 10, "the leftover's pid")[0]
        self.assertEqual(p.wait(timeout=20), 79)
        self.assertFalse(pid_alive(leftover))
        self.assert_no_lock("k")

    def test_the_variable_names_the_file_absolute_and_start_touches_it(self):
        os.utime(self.make_file("beat"), (1000, 1000))
        r = self.run_rlock(["run", "--heartbeat-file", "beat", "--stale-after", "5s", "k", "--",
                            "sh", "-c", 'cd / && echo "$RLOCK_HEARTBEAT_FILE"'], cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), self.path("beat"))
        self.assertGreater(os.stat(self.path("beat")).st_mtime, time.time() - 60)

    def test_stale_after_from_the_config_file_is_a_default(self):
        config = self.make_file("config.toml", 'stale-after = "500ms"\n')
        env = rlock_env(self.server, RLOCK_CONFIG=config)
        self.assertEqual(self.run_rlock(["run", "k", "--", "true"], env=env).returncode, 0)
        r = self.run_rlock(["run", "--heartbeat-file", self.path("beat"), "k", "--", "sleep",
                            "30"], env=env)
        self.assertEqual(r.returncode, 79, r.stderr)
        # A file for every run of the host would let one job's touches keep another alive.
        config = self.make_file("config.toml", 'heartbeat-file = "/tmp/x"\nstale-after = "1s"\n')
        self.server.cmd("FLUSHALL")
        r = self.run_rlock(["run", "k", "--", "true"], env=env)
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("heartbeat-file", r.stderr)
        self.assertEqual(self.server.cmd("DBSIZE"), 0)

    def test_bad_input_is_64_and_touches_nothing_in_redis(self):
        cases = [
            (["--stale-after", "1s"],
             "rlock: error: --stale-after: needs --heartbeat-file PATH"),
            (["--heartbeat-file", self.path("beat")],
             "rlock: error: --heartbeat-file: needs --stale-after D"),
            (["--heartbeat-file", self.path("no/such/dir"), "--stale-after", "1s"],
             "rlock: error: --heartbeat-file: open " + self.path("no/such") +
             ": No such file or directory"),
            (["--heartbeat-file", "", "--stale-after", "1s"], "empty path"),
            (["--heartbeat-file", self.path("beat"), "--stale-after", "0s"], "--stale-after"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.run_rlock(["run", *args, "k", "--", "true"])
                self.assertEqual(r.returncode, 64, r.stderr)
                self.assertIn(message, r.stderr)
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                self.assertEqual(self.server.cmd("DBSIZE"), 0)

    def make_file(self, name, text=""):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)


if __name__ == "__main__":
    unittest.main()
