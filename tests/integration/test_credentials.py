"""Credentials that rotate under a running job (docs/REDIS.md "Managed Redis"): a password file read
again, or a password command run again, for each new connection; a rotation closes the old
connections, as one does, and the job keeps its lock. What the job inherits: no Redis secret
of rlock's. And least privilege (docs/REDIS.md "Least privilege"): the documented ACL line for keys
under a prefix is enough, and a denial names what was denied. (Every RedisTestCase runs rlock
as a user made from the documented lines: harness.documented_acl.)"""
import json
import os
import threading

from harness import RedisTestCase, documented_acl, rlock_env, wait_until

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
                               ["run", "--ttl", "2s", "k", "--", "sleep", "4"],
                               env=rlock_env())
        finally:
            stop.set()
            rotator.join()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreaterEqual(len(self.passwords), 5, "too few rotations to prove anything")
        for p in self.passwords:
            self.assertNotIn(p, r.stdout + r.stderr)
        history = self.run_rlock(["--redis", self.url] + how + ["history", "--json", "k"],
                                 env=rlock_env())
        self.assertEqual(history.returncode, 0, history.stderr)
        runs = [(x["end"], x["exit_status"]) for x in json.loads(history.stdout)["runs"]]
        # Recorded once, also when a rotation closed the connection under the release that
        # carried the entry (both are sent again, and found the second time).
        self.assertEqual(runs, [("exited", 0)], r.stderr)
        for said in ("may not have been recorded", "no longer ours", "could not"):
            self.assertNotIn(said, r.stderr)
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


class LeastPrivilege(RedisTestCase):
    """The README's ACL lines pasted as a user of their own, for keys under a prefix; and
    denials that name what was denied."""

    def user(self, name, rules):
        self.server.cmd("ACL", "SETUSER", name, "reset", "on", ">pw-" + name, *rules)
        self.addCleanup(self.server.cmd, "ACL", "DELUSER", name)
        return f"redis://{name}:pw-{name}@127.0.0.1:{self.server.port}"

    def prefixed(self):
        """README's first line, with the key patterns it gives for the prefix lock:."""
        first = documented_acl()[0]
        return [r for r in first if r != "~*"] + ["~lock:*", "~{lock:*"]

    def test_the_documented_line_for_a_prefix_is_enough_for_run_and_the_operator_verbs(self):
        url = self.user("app", self.prefixed())
        env = rlock_env(RLOCK_REDIS_URL=url)
        for args, ok in ((["run", "lock:x", "--", "true"], {0}),
                         (["run", "--once-per", "day", "lock:x", "--", "true"], {0}),
                         (["reset-period", "lock:x", "--once-per", "day"], {0}),
                         (["status", "lock:x"], {1}),
                         (["inspect", "lock:x"], {1}),
                         (["history", "lock:x"], {0}),
                         (["check", "lock:x", "--every", "1h"], {0})):
            r = self.run_rlock(args, env=env)
            self.assertIn(r.returncode, ok, f"{args}: {r.stderr}")
        token = self.run_rlock(["acquire", "lock:y"], env=env)
        self.assertEqual(token.returncode, 0, token.stderr)
        for args in (["extend", "lock:y", "--token", token.stdout.strip()],
                     ["release", "lock:y", "--token", token.stdout.strip()]):
            r = self.run_rlock(args, env=env)
            self.assertEqual(r.returncode, 0, f"{args}: {r.stderr}")
        # A key outside the patterns: refused, each key of the lock named, nothing changed.
        r = self.run_rlock(["run", "other", "--", "true"], env=env)
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("key patterns must allow every key of this lock: other, {other}:rlock:fence",
                      r.stderr)
        self.assertIsNone(self.server.cmd("GET", "other"))

    def test_a_command_denied_inside_a_script_is_named(self):
        url = self.user("notime", [r for r in documented_acl()[0] if r != "+time"])
        r = self.run_rlock(["run", "k", "--", "true"], env=rlock_env(RLOCK_REDIS_URL=url))
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("the ACL user may not run TIME, which rlock's scripts call", r.stderr)
        self.assertIsNone(self.server.cmd("GET", "k"))
