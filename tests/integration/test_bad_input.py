"""The bad-input corpus: every malformed flag, duration, number, URL, config file and key we
could think of, for every verb that takes it.

Each case must end with its documented exit status (64 usage, 78 configuration), exactly one
line on stderr that starts "rlock: error: ", is valid UTF-8 and carries no raw control
character (input is echoed escaped), nothing on stdout, no crash, and nothing in Redis.
test_cli.py has the messages of the common mistakes; this is the breadth.
"""
import json
import os
import subprocess
import tempfile
import unittest

from harness import RLOCK, SANITIZED_STRIDE, RedisTestCase, rlock_env, sampled, wait_until

USAGE, CONFIG = 64, 78
# tests/compare_outputs.py: every case also runs this binary (the one before a refactoring),
# whose exit status, stdout and stderr must be byte-identical.
COMPARE_BIN = os.environ.get("RLOCK_COMPARE_BIN")

VERBS_WITH_KEY = [["run", "{key}", "--", "true"], ["status", "{key}"], ["inspect", "{key}"],
                  ["acquire", "{key}"], ["extend", "--token", "t", "{key}"],
                  ["release", "--token", "t", "{key}"]]
ALL_VERBS = VERBS_WITH_KEY + [["list"], ["config"]]

DURATION_FLAGS = {"--ttl": ["run", "acquire", "extend"], "--wait": ["run", "acquire"],
                  "--max-run": ["run"], "--kill-after": ["run"], "--min-hold": ["run"],
                  "--connect-timeout": ["run", "status", "list"],
                  "--command-timeout": ["run", "status", "list"],
                  "--retention": ["run", "acquire"], "--retry-delay": ["run"],
                  "--notify-timeout": ["run"]}
BAD_DURATIONS = ["", " ", "abc", "-1s", "+5s", "1x", "1s2", "5ms5", "1.5.5s", "1h-5m", "5 s",
                 "1e9s", "0x10s", "nan", "s", "ms", ".s", "99999999999999999999",
                 "999999999999d", "1\x01s", "5s\n", "\x1b[2J", b"\xff\xfe", b"5\xc3s", "9" * 5000,
                 "\u0665s"]  # an Arabic-Indic digit five

BAD_NUMBERS = [("--limit", "0"), ("--limit", "-1"), ("--limit", "1e3"), ("--limit", "two"),
               ("--limit", "2147483648"), ("--limit", "99999999999999999999"), ("--limit", ""),
               ("--limit", " 3"), ("-E", "256"), ("-E", "-1"), ("-E", "1e2"), ("-E", ""),
               ("-E", "0x4b"), ("--kill-signal", "0"), ("--kill-signal", "99"),
               ("--kill-signal", "-9"), ("--kill-signal", "SIGNOPE"), ("--kill-signal", ""),
               ("--kill-signal", "KILL\n"), ("--on-lost", ""), ("--on-lost", "KILL"),
               ("--leftovers", ""), ("--leftovers", "KILL"), ("--leftovers", "ignore"),
               ("--log-format", "xml"), ("--log-format", ""), ("--metrics-file", ""),
               ("--once-per", ""), ("--once-per", "0s"), ("--once-per", "1500ms"),
               ("--once-per", "fortnight"), ("--once-per", "-1d"), ("--tz", ""),
               ("--tz", "Mars/Olympus_Mons"), ("--tz", "../../etc/passwd"), ("--tz", "/etc/passwd"),
               ("--history-length", "-1"), ("--history-length", "lots"),
               ("--history-length", "99999999"), ("--retry", "-1"), ("--retry", "1000"),
               ("--retry", "x"), ("--retry-on", "0"), ("--retry-on", "256"),
               ("--retry-on", "1,,2"), ("--retry-on", "5-3"), ("--retry-on", ""),
               ("--retry-on", "1-"), ("--notify-on", "sometimes"), ("--notify-on", ""),
               ("--notify-after", "0"), ("--notify-after", "x"), ("--notify-after", "10000"),
               ("--notify", ""), ("--notify", "  ")]

BAD_URLS = ["", " ", "localhost", "localhost:6379", "redis:/h", "redis//h", "http://h",
            "REDIS://h", "redis://", "redis://:6379", "redis://u:p@", "redis://h:", "redis://h:0",
            "redis://h:65536", "redis://h:-1", "redis://h:abc", "redis://h:6379x",
            "redis://h:6379?db=1", "redis://h/x", "redis://h/-1", "redis://h/1/2",
            "redis://h/99999999999999999999", "redis://::1", "redis://[::1", "redis://[::1]x",
            "redis://[::1]:", "unix://", "unix://relative.sock", "unix://?db=1",
            "redis://h h", "redis://h\n", "redis://\x1b[31mh", b"redis://\xff", "redis://" + "h" * 254,
            "redis://u:%zz@h", "redis://u:%4@h"]

BAD_CONFIGS = {
    "syntax error": b"redis = \n",
    "unknown key": b"bogus = 1\n",
    "unknown table": b"[x]\nttl = \"5s\"\n",
    "wrong type": b"redis = 5\n",
    "array for a duration": b"ttl = [\"5s\"]\n",
    "bad duration": b"ttl = \"abc\"\n",
    "bad limit": b"limit = 0\n",
    "bad exit code": b"conflict-exit-code = 300\n",
    "bad url": b"redis = \"redis://h:abc\"\n",
    "duplicate key": b"ttl = \"5s\"\nttl = \"6s\"\n",
    "not UTF-8": b"prefix = \"\xff\"\n",
    "NUL byte": b"ttl = \"5s\"\x00\n",
    "control character": b"\"\x1b[2J\" = 1\n",
    "binary": bytes(range(256)) * 4,
    "nested too deep": b"a = " + b"[" * 10000 + b"]" * 10000 + b"\n",
    "unterminated string": b"prefix = \"abc\n",
    "non-ASCII in a key": b"kill\xca\x8csignal = \"INT\"\n",  # UB in toml++ 3.3: fuzzing
    "non-ASCII space": b"ttl = \"5s\"\xc2\xa0\n",
    "bad flag": b"shared = \"yes\"\n",
    "shared and a limit": b"shared = true\nlimit = 3\n",
}

# Keys are used as given; these are not keys.
BAD_KEYS = ["", "x:rlock:fence", "{x}:rlock:fence", "{x}:rlock:queue", "{x}:rlock:alive",
            "{x}:rlock:wake-0123", "{x}:rlock:shared", "{x}:rlock:shared-values",
            "x:rlock:shared-waiters", "{x}:rlock:ended"]


def arg(a):
    return a if isinstance(a, bytes) else a.encode()


class BadInput(RedisTestCase):
    tried = 0

    @classmethod
    def tearDownClass(cls):
        print(f"\n  bad inputs: {cls.tried}, tried one in {SANITIZED_STRIDE}")
        super().tearDownClass()

    def assert_rejected(self, args, status, env=None, secret=None):
        type(self).tried += 1
        if not sampled(type(self).tried):
            return
        r = subprocess.run([arg(RLOCK)] + [arg(a) for a in args], capture_output=True, timeout=30,
                           env=env or rlock_env(self.server))
        shown = repr(args)[:120]
        if COMPARE_BIN:
            before = subprocess.run([arg(COMPARE_BIN)] + [arg(a) for a in args],
                                    capture_output=True, timeout=30,
                                    env=env or rlock_env(self.server))
            self.assertEqual((r.returncode, r.stdout, r.stderr),
                             (before.returncode, before.stdout, before.stderr),
                             f"{shown}: differs from {COMPARE_BIN}")
        self.assertEqual(r.returncode, status, f"{shown}: {r.stderr!r}")
        self.assertEqual(r.stdout, b"", shown)
        self.assertTrue(r.stderr.endswith(b"\n") and r.stderr.count(b"\n") == 1,
                        f"{shown}: not one line: {r.stderr[:300]!r}")
        line = r.stderr[:-1]
        self.assertTrue(line.startswith(b"rlock: error: "), f"{shown}: {line[:200]!r}")
        self.assertFalse([c for c in line if c < 0x20 or c == 0x7f],
                         f"{shown}: raw control characters in {line[:200]!r}")
        line.decode("utf-8")  # raises on bytes that are not UTF-8
        self.assertEqual(self.server.cmd("DBSIZE"), 0, f"{shown} wrote to Redis")
        if secret:
            for piece in {secret[i:i + 4] for i in range(len(secret) - 3)}:
                self.assertNotIn(piece.encode(), r.stderr, f"{shown}: a piece of the password")

    def test_bad_durations_for_every_flag_that_takes_one(self):
        for flag, verbs in DURATION_FLAGS.items():
            for verb in verbs:
                args = next(v for v in ALL_VERBS if v[0] == verb)
                for d in BAD_DURATIONS:
                    if flag == "--wait" and d == "inf":
                        continue
                    with self.subTest(flag=flag, verb=verb, value=d):
                        self.assert_rejected(
                            [args[0], flag, d] + [a.replace("{key}", "k") for a in args[1:]],
                            USAGE)
        for d in BAD_DURATIONS + ["0", "0s"]:
            with self.subTest(flag="--slower-than", verb="check", value=d):
                self.assert_rejected(["check", "k", "--every", "1h", "--slower-than", d], USAGE)

    def test_bad_numbers_signals_and_choices(self):
        for flag, value in BAD_NUMBERS:
            with self.subTest(flag=flag, value=value):
                self.assert_rejected(["run", flag, value, "k", "--", "true"], USAGE)

    def test_unknown_flags_and_missing_values_for_every_verb(self):
        for args in ALL_VERBS:
            verb, rest = args[0], [a.replace("{key}", "k") for a in args[1:]]
            missing_value = ["--ttl"] if verb in ("run", "acquire", "extend") else ["--prefix"]
            for bad in (["--bogus"], missing_value, ["-Z"], ["--redis"], ["--\x1b[2J"],
                        [b"--\xff"]):
                if verb == "run":  # before '--', where rlock's own options end
                    attempt = ["run", "k"] + bad + ["--", "true"]
                elif bad in (missing_value, ["--redis"]):  # last, or it takes the key
                    attempt = [verb] + rest + bad
                else:
                    attempt = [verb] + bad + rest
                with self.subTest(args=attempt):
                    self.assert_rejected(attempt, USAGE)
                if bad not in (missing_value, ["--redis"]):  # before the verb, too
                    with self.subTest(args=bad + [verb] + rest):
                        self.assert_rejected(bad + [verb] + rest, USAGE)
            # An option of another command, typed before this one.
            other = ["--force"] if verb != "release" else ["--ttl", "5s"]
            with self.subTest(args=other + [verb] + rest):
                self.assert_rejected(other + [verb] + rest, USAGE)

    def test_extra_and_missing_arguments(self):
        for args in (["inspect"], ["inspect", "a", "b"], ["acquire"], ["extend", "k"],
                     ["release", "k"], ["release", "--token", "t", "--force", "k"],
                     ["release", "--now", "k"], ["release", "--all", "k"],
                     ["acquire", "--while-pid", "x", "k"], ["acquire", "--while-pid", "0", "k"],
                     ["acquire", "--while-pid", "-5", "k"], ["acquire", "--while-pid", "k"],
                     ["acquire", "--while-pid", "4194000", "k"], ["run", "--while-pid", "1", "k",
                                                                  "--", "true"],
                     ["release", "--force", "--all", "--token", "0" * 32, "k"], ["--redis"],
                     ["-q"], ["--redis", "redis://h", "-q"],
                     ["status"], ["list", "a", "b"], ["config", "x"], ["run", "k"],
                     ["run", "--", "true"], ["run", "k", "-c"], ["help", "nothing"],
                     ["history"], ["history", "-n", "0", "k"], ["history", "-n", "x", "k"]):
            with self.subTest(args=args):
                self.assert_rejected(args, USAGE)

    def test_flag_values(self):
        # A flag takes true or false after '=' (or no value): anything else is a usage error.
        for args in (["run", "--fair=maybe", "k", "--", "true"],
                     ["run", "--fair=\x1b[2J", "k", "--", "true"],
                     ["acquire", "--fair=99999999999999999999", "k"],
                     ["config", "-q", "--record-skips=sometimes"],
                     ["run", "--shared=maybe", "k", "--", "true"]):
            with self.subTest(args=args):
                self.assert_rejected(args, USAGE)

    def test_what_shared_excludes(self):
        # --shared does not go with what counts holders its own way (--limit, --once-per), nor
        # with Redlock: refused before anything reaches Redis (assert_rejected checks DBSIZE).
        url = self.server.url
        for args in (["run", "--shared", "--limit", "3", "k", "--", "true"],
                     ["run", "--limit", "1", "--shared", "k", "--", "true"],
                     ["run", "--shared", "--once-per", "day", "k", "--", "true"],
                     ["acquire", "--shared", "--limit", "2", "k"],
                     ["--shared", "acquire", "-w", "5s", "--limit", "2", "k"],
                     ["config", "--shared", "--limit", "2"],
                     ["run", "--shared", "--redis", url, "--redis", url, "k", "--", "true"],
                     ["acquire", "-u", url, "-u", url, "--shared", "-w", "5s", "k"]):
            with self.subTest(args=args):
                self.assert_rejected(args, USAGE)

    def test_keys_that_are_not_keys_for_every_verb(self):
        for args in VERBS_WITH_KEY:
            for key in BAD_KEYS:
                with self.subTest(verb=args[0], key=key):
                    self.assert_rejected([a.replace("{key}", key) for a in args], USAGE)

    def test_bad_urls_from_the_flag_the_environment_and_the_file(self):
        for url in BAD_URLS:
            with self.subTest(url=url):
                self.assert_rejected(["status", "--redis", url, "k"], CONFIG)
                if b"\0" not in arg(url) and url != "":  # an empty variable means "not set"
                    env = rlock_env()
                    env[b"RLOCK_REDIS_URL"] = arg(url)
                    env = {arg(k): arg(v) for k, v in env.items()}
                    self.assert_rejected(["status", "k"], CONFIG, env=env)

    def test_passwords_with_url_special_characters_never_show(self):
        # Unencoded '/', '?', '#' and a stray '%' make a URL that cannot be read; '@' and ':' are
        # read (the last '@' ends the password). Every error names the problem and shows no
        # piece of the user or password, from the flag, the environment and a config file.
        for c in "/?#%@:":
            secret = f"Qz{c}Wx{c}Vb9"
            for url in (f"redis://:{secret}@h:99999", f"redis://app:{secret}@h:0/1",
                        f"rediss://{secret}@h:x", f"redis-sentinel://:{secret}@h:99999/m"):
                for args in ALL_VERBS:
                    attempt = [args[0], "--redis", url] + [a.replace("{key}", "k")
                                                           for a in args[1:]]
                    with self.subTest(url=url, verb=args[0]):
                        self.assert_rejected(attempt, CONFIG, secret=secret)
                with self.subTest(url=url, source="environment and file"):
                    self.assert_url_rejected_from_environment_and_file(url, secret)

    def assert_url_rejected_from_environment_and_file(self, url, secret):
        self.assert_rejected(["status", "k"], CONFIG, secret=secret,
                             env=rlock_env(RLOCK_REDIS_URL=url))
        path = self.path("config.toml")
        with open(path, "w") as f:
            f.write(f'redis = "{url}"\n')
        self.assert_rejected(["run", "k", "--", "true"], CONFIG, secret=secret,
                             env=rlock_env(RLOCK_CONFIG=path))

    def test_a_password_without_its_at_host_never_shows(self):
        # "redis://user:secret" (the '@host' forgotten, or the '@' mistyped) reads as a host and
        # a port: a port that is no number is not shown, from the flag, the environment and a
        # config file, for every URL scheme that takes a password.
        secret = "Qz7Wx9Vb"
        for url in (f"redis://default:{secret}", f"redis://:{secret}", f"rediss://app:{secret}/0",
                    f"redis://default:{secret}127.0.0.1:6379", f"redis://[::1]:{secret}",
                    f"redis-sentinel://h1:{secret},h2:26379/m"):
            with self.subTest(url=url):
                self.assert_rejected(["status", "--redis", url, "k"], CONFIG, secret=secret)
                self.assert_url_rejected_from_environment_and_file(url, secret)
        # A port that is a number is shown: it is no secret, and it is what was wrong.
        r = subprocess.run([RLOCK, "status", "--redis", "redis://h:70000", "k"],
                           capture_output=True, text=True, env=rlock_env())
        self.assertIn("port '70000'", r.stderr)

    def test_an_unknown_scheme_lists_every_scheme(self):
        r = subprocess.run([RLOCK, "status", "--redis", "http://h", "k"], capture_output=True,
                           text=True, env=rlock_env())
        self.assertEqual(r.returncode, CONFIG)
        for scheme in ("redis://", "rediss://", "unix://", "redis-sentinel://",
                       "rediss-sentinel://"):
            self.assertIn(scheme, r.stderr)

    def test_bad_config_files(self):
        for name, content in BAD_CONFIGS.items():
            with self.subTest(config=name):
                path = self.path("config.toml")
                with open(path, "wb") as f:
                    f.write(content)
                # The URL comes from the environment (which beats the file), so that only the
                # file can be wrong; but not when the file's URL is what is wrong.
                env = rlock_env(None if name == "bad url" else self.server)
                self.assert_rejected(["status", "--config", path, "k"], CONFIG, env=env)
                self.assert_rejected(["run", "k", "--", "true"], CONFIG,
                                     env=dict(env, RLOCK_CONFIG=path))
        for path in ("/nonexistent/rlock.toml", tempfile.gettempdir(), ""):
            with self.subTest(config=path):
                self.assert_rejected(["status", "--config", path, "k"],
                                     USAGE if path == "" else CONFIG)

    def test_bad_tls_material(self):
        for flag in ("--cacert", "--cert", "--key", "--cacertdir"):
            with self.subTest(flag=flag):
                url = f"rediss://127.0.0.1:{self.server.port}"
                self.assert_rejected(["status", "--redis", url, flag, "/nonexistent", "k"],
                                     CONFIG)


class OddButValidKeys(RedisTestCase):
    """Keys are bytes, used exactly as given; what rlock prints of them stays one safe line."""

    def test_one_escaping_rule_for_every_output(self):
        # Valid UTF-8 as is, control characters and invalid UTF-8 as \xNN: on stdout (status,
        # list, inspect), on stderr (the busy line), the same.
        for key, shown in ((b"J\xc3\xb6rg-\xe6\x97\xa5", b"J\xc3\xb6rg-\xe6\x97\xa5"),
                           (b"bad\xff\x1b[2J", b"bad\\xff\\x1b[2J")):
            with self.subTest(key=key):
                self.server.cmd("FLUSHALL")
                holder = subprocess.Popen([RLOCK.encode(), b"run", key, b"--", b"sleep", b"30"],
                                          env=rlock_env(self.server), stderr=subprocess.DEVNULL)
                self.procs.append(holder)
                wait_until(lambda: self.server.cmd("DBSIZE") >= 2, 10, "the lock")
                for args in ([b"status", key], [b"list"], [b"inspect", key]):
                    r = subprocess.run([RLOCK.encode()] + args, env=rlock_env(self.server),
                                       capture_output=True, timeout=30)
                    self.assertIn(shown, r.stdout, args)
                busy = subprocess.run([RLOCK.encode(), b"run", key, b"--", b"true"],
                                      env=rlock_env(self.server), capture_output=True, timeout=30)
                self.assertIn(b"rlock: " + shown + b": busy", busy.stderr)
                r = subprocess.run([RLOCK.encode(), b"status", b"--json", key],
                                   env=rlock_env(self.server), capture_output=True, timeout=30)
                doc = json.loads(r.stdout)
                self.assertEqual(doc["locks"][0]["key"], key.decode(errors="replace"))
                holder.kill()
                holder.wait()

    def test_keys_with_control_characters_and_other_bytes(self):
        for key in ("a\nb", "\x1b[2J", "J\u00f6rg", "tab\there", "k" * 10000):
            with self.subTest(key=key[:20]):
                self.server.cmd("FLUSHALL")
                before = self.server.time_us()
                r = subprocess.run([RLOCK, "run", "-v", key, "--", "sh", "-c",
                                    'test "$RLOCK_KEY" = "$1"', "sh", key],
                                   env=rlock_env(self.server), capture_output=True, timeout=30)
                self.assertEqual(r.returncode, 0, r.stderr[:300])
                fence_key = "{" + key + "}:rlock:fence"
                self.assertGreaterEqual(int(self.server.cmd("GET", fence_key)), before)
                self.assertIsNone(self.server.cmd("GET", key))
                for line in r.stderr.split(b"\n")[:-1]:
                    self.assertTrue(line.startswith(b"rlock: "), line[:100])
                    self.assertFalse([c for c in line if c < 0x20 or c == 0x7f], line[:100])
                s = subprocess.run([RLOCK, "status", key], env=rlock_env(self.server),
                                   capture_output=True, timeout=30)
                self.assertEqual(s.returncode, 1)  # free
                self.assertEqual(s.stdout.count(b"\n"), 1, s.stdout[:100])


if __name__ == "__main__":
    unittest.main()
