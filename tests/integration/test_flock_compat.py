"""flock(1)'s spellings: util-linux's own flock test suite (tests/ts/flock/flock), replayed against
`rlock run` with a key in place of the lock file, so that a crontab line moved from
`flock -xn /var/lock/x.lock cmd` to `rlock run -xn KEY -- cmd` works; and the options of flock
that mean nothing for a lock in Redis refused in one line that says what rlock offers."""
import os

from harness import RedisTestCase, wait_until


class FlockSuite(RedisTestCase):
    def setUp(self):
        super().setUp()
        # The suite's "general lock": a shared holder, started first. flock's suite has it sleep
        # 2 s; here it holds until the test lets it go, so that a slow machine (a sanitizer
        # build on a loaded CI) never sees it end before the cases that need it held.
        started = self.path("started")
        self.general = self.start(["run", "--shared", "lockfile", "--", "sh", "-c",
                                   f"touch {started}; "
                                   f"while [ ! -e {self.path('go')} ]; do sleep 0.02; done"])
        wait_until(lambda: os.path.exists(started), 10, "the shared holder")

    def do_lock(self, opts, expected, message):
        r = self.run_rlock(["run"] + opts + ["lockfile", "--", "echo", message])
        self.assertEqual(r.returncode, expected, f"{opts}: {r.stderr}")
        return r

    def test_the_replayed_cases(self):
        never = "You will never see this!"
        r = self.do_lock(["--nonblock", "--conflict-exit-code", "123"], 123, never)
        self.assertNotIn(never, r.stdout)
        self.do_lock(["--nb", "-E", "123"], 123, never)
        r = self.do_lock(["--shared"], 0, "Have shared lock")
        self.assertEqual(r.stdout, "Have shared lock\n")
        self.do_lock(["-s"], 0, "Have shared lock")
        self.do_lock(["--nonblock", "--exclusive", "--conflict-exit-code", "123"], 123, never)
        self.do_lock(["-xn", "-E", "123"], 123, never)
        # flock's -e is -x, and its durations may start with a dot (flock -w .007).
        self.do_lock(["-en", "-E", "123"], 123, never)
        self.do_lock(["-e", "-w", ".007", "-E", "123"], 123, never)
        with open(self.path("go"), "w"):  # the general lock ends within the timeout
            pass
        r = self.do_lock(["--timeout", "5", "--conflict-exit-code", "5"], 0, "After timeout.")
        self.assertEqual(r.stdout, "After timeout.\n")
        self.assertEqual(self.general.wait(timeout=10), 0)

    def test_what_means_nothing_here_is_refused_with_what_rlock_offers(self):
        for opts, offer in ((["--no-fork", "--nonblock"], "rlock acquire --while-pid"),
                            (["-F"], "rlock acquire --while-pid"),
                            (["-o"], "--leftovers"),
                            (["--close"], "--leftovers"),
                            (["--unlock"], "rlock release KEY --token"),
                            (["--fcntl"], "a Redis key, not a file"),
                            (["-x", "--shared"], "--exclusive excludes --shared")):
            with self.subTest(opts=opts):
                r = self.run_rlock(["run"] + opts + ["other", "--", "true"])
                self.assertEqual(r.returncode, 64, r.stderr)
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                self.assertIn(offer, r.stderr)
                self.assertIsNone(self.server.cmd("GET", "other"))
