"""What a held lock's run is doing when it is not simply running, as status and inspect show
it from another host (man rlock, "status"): a stop under way, who asked and when SIGKILL is
due; a pending --retry attempt. The phase rides on the renewals and dies with the lock."""
import json
import os
import pwd
import shutil
import signal
import tempfile
import unittest

from harness import (RedisServer, RedisTestCase, rlock_env, run_rlock, start_rlock, stop_procs,
                     wait_until)

KEY = "lock:job"
PHASES = "{lock:job}:rlock:phase"
ME = pwd.getpwuid(os.geteuid()).pw_name

# A job that ignores TERM, as a stuck one does: only SIGKILL ends it.
STUBBORN = "trap '' TERM; echo $$ > \"$T/started\"; while :; do sleep 0.05; done"
# A job that fails at once, each attempt counted.
FAILING = "echo x >> \"$T/attempts\"; exit 3"


class RunPhase(RedisTestCase):

    def host(self, name):
        return rlock_env(self.server, RLOCK_HOSTNAME=name, T=self.tmp)

    def status(self, verb="status", free_ok=False):
        r = self.run_rlock([verb, "--json", KEY])
        if free_ok and r.returncode == 1:
            return None  # not taken yet
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        return doc["locks"][0] if "locks" in doc else doc

    def phase_of(self, holder_of):
        """The phase the first holder HOLDER_OF(status) names, once status shows one."""
        def shown():
            lock = self.status(free_ok=True)
            h = holder_of(lock) if lock else None
            return h.get("phase") if h else None
        return wait_until(shown, 10, "the phase in status")

    def stop_stubborn_job(self, run_args, holder_of):
        """Runs STUBBORN under RUN_ARGS with --kill-after 30s, stops it from another host, and
        returns the phase status showed meanwhile and status's text."""
        job = self.start(["run", "--ttl", "90s", "--kill-after", "30s", *run_args, KEY, "-c",
                          STUBBORN], env=self.host("web-1"))
        pid = int(self.wait_file("started"))
        stop = self.start(["stop", KEY, "--reason", "db maintenance"], env=self.host("ops-1"))
        phase = self.phase_of(holder_of)
        text = self.run_rlock(["status", KEY]).stdout
        # The job ignores TERM; SIGKILL now rather than in 30s ends the test's wait.
        os.killpg(pid, signal.SIGKILL)
        job.wait(timeout=20)
        stop.communicate(timeout=20)
        self.assertEqual(job.returncode, 80, job.stderr.read())
        # The phase goes with the lock.
        self.assert_no_lock(KEY)
        self.assertEqual(self.server.cmd("EXISTS", PHASES), 0)
        return phase, text

    def check_stopping(self, phase):
        self.assertEqual(phase["state"], "stopping")
        self.assertEqual((phase["why"], phase["signal"], phase["by"], phase["reason"]),
                         ("stopped", "TERM", f"{ME}@ops-1", "db maintenance"))
        # SIGKILL is due 30s after TERM, by the server's clock.
        self.assertLess(phase["ago_ms"], 10000)
        self.assertGreater(phase["due_in_ms"], 20000)
        self.assertLessEqual(phase["due_in_ms"], 30000)
        self.assertLessEqual(abs(phase["due_in_ms"] + phase["ago_ms"] - 30000), 50)

    def test_a_stop_under_way_shows_who_asked_and_when_kill_is_due(self):
        phase, text = self.stop_stubborn_job([], lambda lock: lock)
        self.check_stopping(phase)
        self.assertRegex(text, rf"stopping: SIGTERM sent \S+ ago by {ME}@ops-1 "
                               r"\(db maintenance\), SIGKILL in 2\d(\.\d)?s")

    def test_a_semaphore_place_and_a_shared_place_show_their_stop(self):
        for args, places in ((["--limit", "2"], "semaphore_holders"),
                             (["--shared"], "shared_holders")):
            with self.subTest(args=args):
                if os.path.exists(self.path("started")):
                    os.unlink(self.path("started"))
                phase, text = self.stop_stubborn_job(
                    args, lambda lock, p=places: (lock.get(p) or [None])[0])
                self.check_stopping(phase)
                self.assertIn("[stopping: SIGTERM sent", text)

    def test_inspect_shows_the_phase(self):
        job = self.start(["run", "--ttl", "90s", "--kill-after", "30s", KEY, "-c", STUBBORN],
                         env=self.host("web-1"))
        pid = int(self.wait_file("started"))
        stop = self.start(["stop", KEY], env=self.host("ops-1"))
        wait_until(lambda: self.status("inspect").get("phase"), 10, "the phase in inspect")
        r = self.run_rlock(["inspect", KEY])
        self.assertRegex(r.stdout, rf"phase +stopping: SIGTERM sent \S+ ago by {ME}@ops-1, "
                                   r"SIGKILL in ")
        os.killpg(pid, signal.SIGKILL)
        job.wait(timeout=20)
        stop.communicate(timeout=20)

    def test_a_pending_retry_shows_the_attempt_to_come(self):
        job = self.start(["run", "--retry", "2", "--retry-delay", "20s", KEY, "-c", FAILING],
                         env=self.host("web-1"))
        phase = self.phase_of(lambda lock: lock)
        self.assertEqual((phase["state"], phase["attempt"], phase["attempts"],
                          phase["last_exit_status"]), ("retrying", 2, 3, 3))
        self.assertGreater(phase["due_in_ms"], 10000)
        self.assertLessEqual(phase["due_in_ms"], 20000)
        text = self.run_rlock(["status", KEY]).stdout
        self.assertRegex(text, r"retrying: attempt 2 of 3 in 1\d(\.\d)?s, attempt 1 exited 3")
        # A stop ends the run before its next attempt; the phase goes with the lock.
        stop = self.run_rlock(["stop", KEY])
        self.assertEqual(stop.returncode, 0, stop.stderr)
        job.wait(timeout=20)
        with open(self.path("attempts")) as f:
            self.assertEqual(f.read().split(), ["x"])
        self.assert_no_lock(KEY)
        self.assertEqual(self.server.cmd("EXISTS", PHASES), 0)

    def test_a_plain_run_shows_no_phase_and_writes_none(self):
        job = self.start(["run", KEY, "-c", "echo $$ > \"$T/started\"; exec sleep 30"],
                         env=self.host("web-1"))
        pid = int(self.wait_file("started"))
        lock = self.status()
        self.assertEqual(lock["state"], "held")
        self.assertNotIn("phase", lock)
        self.assertEqual(self.server.cmd("EXISTS", PHASES), 0)
        os.kill(pid, signal.SIGKILL)
        job.wait(timeout=20)


class RedlockPhase(unittest.TestCase):
    """Three independent masters: the phase rides to each with the renewal."""

    def setUp(self):
        self.servers = [RedisServer() for _ in range(3)]
        self.urls = [a for s in self.servers for a in ("--redis", s.url)]
        self.tmp = tempfile.mkdtemp(prefix="rlock-phase-")
        self.procs = []

    def tearDown(self):
        stop_procs(self.procs)
        for s in self.servers:
            s.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, verb, args, host):
        env = rlock_env(None, RLOCK_HOSTNAME=host, T=self.tmp)
        p = start_rlock([verb, *self.urls, *args], env=env)
        self.procs.append(p)
        return p

    def test_a_stop_under_redlock_is_shown_from_every_node(self):
        job = self.start("run", ["--ttl", "90s", "--kill-after", "30s", KEY, "-c", STUBBORN],
                         "web-1")
        def started():
            try:
                with open(os.path.join(self.tmp, "started")) as f:
                    text = f.read()
                return text if text.endswith("\n") else None
            except FileNotFoundError:
                return None
        pid = int(wait_until(started, 10, "the job's start"))
        stop = self.start("stop", [KEY], "ops-1")

        def phase():
            r = run_rlock(["status", "--json", *self.urls, KEY], env=rlock_env(None))
            return json.loads(r.stdout)["locks"][0].get("phase")
        shown = wait_until(phase, 10, "the phase in status")
        self.assertEqual((shown["state"], shown["by"]), ("stopping", f"{ME}@ops-1"))
        wait_until(lambda: all(s.cmd("EXISTS", PHASES) == 1 for s in self.servers), 10,
                   "the phase on every node")
        os.killpg(pid, signal.SIGKILL)
        job.wait(timeout=20)
        stop.communicate(timeout=20)
        self.assertEqual([s.cmd("EXISTS", PHASES) for s in self.servers], [0, 0, 0])


if __name__ == "__main__":
    unittest.main()
