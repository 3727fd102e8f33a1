"""Credentials that rotate under a running job (README "Managed Redis"): a password file read
again, or a password command run again, for each new connection; a rotation closes the old
connections, as one does, and the job keeps its lock. And what the job inherits: no Redis
secret of rlock's."""
import json
import os
import threading

from harness import RedisTestCase, rlock_env, wait_until

USER = "app"


class Rotation(RedisTestCase):
    def setUp(self):
        super().setUp()
        self.secret_file = self.path("redis-password")
        self.passwords = []
        self.rotate_to("first-secret-0")
        self.url = f"redis://{USER}:@127.0.0.1:{self.server.port}"

    def tearDown(self):
        self.server.cmd("ACL", "DELUSER", USER)
        super().tearDown()

    def rotate_to(self, password):
        """As a rotation does: the new secret in place (written whole), the user's password
        changed, its connections closed."""
        tmp = self.secret_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(password + "\n")
        os.chmod(tmp, 0o600)
        os.rename(tmp, self.secret_file)
        self.server.cmd("ACL", "SETUSER", USER, "on", "resetpass", ">" + password, "~*", "&*",
                        "+@all")
        self.server.cmd("CLIENT", "KILL", "USER", USER)
        self.passwords.append(password)

    def rotating(self, stop, every=0.5):
        n = 0
        while not stop.wait(every):  # pacing of the rotations, not a synchronisation
            n += 1
            self.rotate_to(f"rotated-secret-{n}")

    def run_through_rotations(self, how):
        stop = threading.Event()
        rotator = threading.Thread(target=self.rotating, args=(stop,), daemon=True)
        rotator.start()
        try:
            r = self.run_rlock(["--redis", self.url] + how +
                               ["run", "--ttl", "1s", "k", "--", "sleep", "4"],
                               env=rlock_env())
        finally:
            stop.set()
            rotator.join()
        self.assertGreaterEqual(len(self.passwords), 5, "too few rotations to prove anything")
        self.assertEqual(r.returncode, 0, r.stderr)
        for p in self.passwords:
            self.assertNotIn(p, r.stdout + r.stderr)
        history = self.run_rlock(["--redis", self.url] + how + ["history", "--json", "k"],
                                 env=rlock_env())
        self.assertEqual(history.returncode, 0, history.stderr)
        runs = json.loads(history.stdout)["runs"]
        self.assertEqual([(x["end"], x["exit_status"]) for x in runs], [("exited", 0)])
        return r

    def test_a_password_file_is_read_again_for_each_connection(self):
        self.run_through_rotations(["--password-file", self.secret_file])

    def test_a_password_command_is_run_again_for_each_connection(self):
        self.run_through_rotations(["--password-command", f"cat {self.secret_file}"])

    def test_a_password_command_that_fails_is_one_line_and_shows_nothing_it_printed(self):
        cases = [("echo leaked-1; exit 3", "exited with status 3"),
                 ("true", "printed no password"),
                 ("echo leaked-2; sleep 30", "ran longer than 1s")]
        for command, said in cases:
            with self.subTest(command=command):
                r = self.run_rlock(["--redis", self.url, "--connect-timeout", "1s",
                                    "--password-command", command, "run", "k", "--", "true"],
                                   env=rlock_env())
                self.assertEqual(r.returncode, 69, r.stderr)
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn("the password command (", lines[0])
                self.assertIn(said, lines[0])
                self.assertNotIn("leaked", r.stderr + r.stdout)
                self.assertIsNone(self.server.cmd("GET", "k"))
        # Its stderr is the operator's to read: passed through.
        r = self.run_rlock(["--redis", self.url, "--password-command", "echo vault: denied >&2",
                            "status", "k"], env=rlock_env())
        self.assertIn("vault: denied", r.stderr)

    def test_the_job_gets_no_redis_secret(self):
        out = self.path("env")
        url = f"redis://{USER}:{self.passwords[-1]}@127.0.0.1:{self.server.port}"
        env = rlock_env(RLOCK_REDIS_URL=url, RLOCK_PASSWORD="not-used-here",
                        REDISCLI_AUTH="redis-clis-own")
        r = self.run_rlock(["run", "k", "--", "sh", "-c", f"env > {out}"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            seen = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
        self.assertNotIn("RLOCK_PASSWORD", seen)
        self.assertEqual(seen["RLOCK_REDIS_URL"], f"redis://{USER}:@127.0.0.1:{self.server.port}")
        self.assertNotIn(self.passwords[-1], "\n".join(seen.values()))
        # redis-cli's own variable is the job's to use, as documented.
        self.assertEqual(seen["REDISCLI_AUTH"], "redis-clis-own")
