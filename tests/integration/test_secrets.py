"""No password reaches any output when the connection fails, whatever the verb, wherever the
password came from, however the connection failed (refused, unresolvable, TLS refused).

Every verb runs with -v (the most it ever says) and its output, stdout and stderr, must not hold
the secret or any distinctive piece of it, percent-encoded or not.
"""
import os
import shutil
import tempfile
import unittest

from harness import RedisTestCase, free_port, rlock_env, run_rlock, wait_until
from test_connection import make_certificates, tls_server

SECRET = "Sh0rtBread-91x"
# The same kind of secret with URL-special characters, as a URL must carry it (percent-encoded).
SPECIAL = "p@ss:w/rd%91?#"
SPECIAL_ENCODED = "p%40ss%3Aw%2Frd%2591%3F%23"

VERBS = [
    ["run", "k", "--", "true"],
    ["run", "k", "-c", "true"],
    ["status", "k"],
    ["inspect", "k"],
    ["list"],
    ["acquire", "k"],
    ["extend", "k", "--token", "0123456789abcdef0123456789abcdef"],
    ["release", "k", "--token", "0123456789abcdef0123456789abcdef"],
    ["release", "k", "--force"],
    ["history", "k"],
    ["config"],
]


def pieces(secret):
    """The secret and every 6-character piece of it: no part may show."""
    return {secret} | {secret[i:i + 6] for i in range(len(secret) - 5)}


class SecretsInConnectionErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rlock-secrets-")
        make_certificates(cls.tmp)
        cls.tls_port = free_port()
        # A TLS server whose certificate the system CAs do not vouch for: the handshake fails.
        cls.tls = tls_server(cls.tmp, cls.tls_port)
        cls.password_file = os.path.join(cls.tmp, "password")
        with open(cls.password_file, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(cls.password_file, 0o600)

    @classmethod
    def tearDownClass(cls):
        cls.tls.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def places(self):
        """(name, scheme://host:port) of servers that fail in each way."""
        return [("refused", f"redis://127.0.0.1:{free_port()}"),
                ("unresolvable", "redis://no-such-host.invalid:6379"),
                ("tls refused", f"rediss://127.0.0.1:{self.tls_port}")]

    def sources(self, place):
        """(name, URL, extra environment, extra flags, secrets to look for) per password source."""
        scheme, rest = place.split("://", 1)
        config = os.path.join(self.tmp, "config.toml")
        with open(config, "w") as f:
            f.write(f'redis = "{scheme}://app:{SECRET}@{rest}"\n')
        return [
            ("url", f"{scheme}://app:{SECRET}@{rest}", {}, [], pieces(SECRET)),
            ("url, special", f"{scheme}://app:{SPECIAL_ENCODED}@{rest}", {}, [],
             pieces(SPECIAL) | pieces(SPECIAL_ENCODED)),
            ("RLOCK_PASSWORD", place, {"RLOCK_PASSWORD": SECRET}, [], pieces(SECRET)),
            ("REDISCLI_AUTH", place, {"REDISCLI_AUTH": SECRET}, [], pieces(SECRET)),
            ("password file", place, {}, ["--password-file", self.password_file],
             pieces(SECRET)),
            ("config file", None, {"RLOCK_CONFIG": config}, [], pieces(SECRET)),
        ]

    def test_no_verb_prints_a_password_when_it_cannot_connect(self):
        for failure, place in self.places():
            for source, url, env, flags, secrets in self.sources(place):
                for verb in VERBS:
                    with self.subTest(failure=failure, source=source, verb=" ".join(verb)):
                        args = verb[:1] + ["-v"] + flags + verb[1:]
                        if url:
                            args[1:1] = ["--redis", url]
                        r = run_rlock(args, env=rlock_env(**env), timeout=30)
                        if verb[0] != "config":
                            self.assertIn(r.returncode, (69, 78), r.stderr)
                            self.assertTrue(r.stderr.strip(), "no error message")
                        out = r.stdout + r.stderr
                        for s in secrets:
                            self.assertNotIn(s, out, f"a piece of the password in: {out!r}")



class SecretsInTheCommand(RedisTestCase):
    """`-c 'PGPASSWORD=... psql'`: the command is named psql everywhere it is recorded or shown,
    and no assignment, nor any argument, reaches the lock value, status or the history."""

    def test_assignments_and_arguments_never_recorded(self):
        ready = self.path("ready")
        holder = self.start(["run", "k", "-c",
                             f"PGPASSWORD={SECRET} OTHER='two words' python3 -c "
                             f"'import time; time.sleep(30)' --pw={SECRET} & touch {ready}; wait"])
        wait_until(lambda: os.path.exists(ready), 10, "the holder's command")
        seen = [self.server.cmd("GET", "k")]
        self.assertIsNotNone(seen[0], "the lock was not held")
        self.assertIn(" cmd=python3", seen[0])
        for args in (["status", "k"], ["status", "--json", "k"], ["inspect", "k"],
                     ["inspect", "--json", "k"], ["list"], ["run", "k", "--", "true"]):
            r = self.run_rlock(args)
            seen.append(r.stdout + r.stderr)
        holder.terminate()
        holder.wait(timeout=10)
        r = self.run_rlock(["history", "k"])
        seen.append(r.stdout)
        r = self.run_rlock(["history", "--json", "k"])
        seen.append(r.stdout)
        self.assertIn("python3", seen[-1])
        for text in seen:
            for word in ("PGPASSWORD", SECRET, "OTHER", "two words", "--pw"):
                self.assertNotIn(word, text)

    def test_an_assignment_as_the_program_is_refused_unprinted(self):
        r = self.run_rlock(["run", "k", "--", f"PGPASSWORD={SECRET}", "psql"])
        self.assertEqual(r.returncode, 127)
        self.assertIn("PGPASSWORD=...: an assignment is not a command", r.stderr)
        self.assertNotIn(SECRET, r.stderr)
        self.assertEqual(self.server.cmd("DBSIZE"), 0)


if __name__ == "__main__":
    unittest.main()
