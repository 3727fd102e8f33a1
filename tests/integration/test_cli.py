"""The command line: bad input is one clear line, the documented exit status, nothing in Redis."""
import json
import unittest

from harness import RedisTestCase, free_port, rlock_env, run_rlock

BAD_RUN_INPUT = [
    # (arguments after "run", what the one line must mention)
    (["", "--", "true"], "KEY must not be empty"),
    (["k"], "missing command"),
    (["k", "--"], "missing command"),
    (["k", "true"], "put '--' before the command"),
    (["--bogus", "k", "--", "true"], "unknown option '--bogus'"),
    (["--ttl", "0", "k", "--", "true"], "--ttl"),
    (["--ttl", "abc", "k", "--", "true"], "bad duration 'abc'"),
    (["--ttl", "-5s", "k", "--", "true"], "--ttl"),
    (["--ttl", "10ms", "k", "--", "true"], "at least"),
    (["--ttl", "99999d", "k", "--", "true"], "bad duration"),
    (["--wait", "soon", "k", "--", "true"], "--wait"),
    (["--max-run", "0s", "k", "--", "true"], "--max-run"),
    (["--min-hold", "1x", "k", "--", "true"], "--min-hold"),
    (["--kill-after", "15s", "k", "--", "true"], "below half the ttl"),
    (["--ttl", "4s", "--kill-after", "2s", "k", "--", "true"], "below half the ttl"),
    (["--kill-after", "0", "k", "--", "true"], "--kill-after"),
    (["--kill-signal", "NOPE", "k", "--", "true"], "unknown signal"),
    (["-E", "256", "k", "--", "true"], "0 to 255"),
    (["-E", "-1", "k", "--", "true"], "0 to 255"),
    (["-E", "x", "k", "--", "true"], "conflict-exit-code"),
    (["--on-lost", "maybe", "k", "--", "true"], "--on-lost"),
    (["-n", "-w", "5s", "k", "--", "true"], "excludes"),
    (["-q", "-v", "k", "--", "true"], "exclude each other"),
    (["k", "-c", "true", "--", "true"], "not both"),
    (["--limit", "0", "k", "--", "true"], "number of holders"),
    (["--limit", "many", "k", "--", "true"], "number of holders"),
    (["--limit", "-3", "k", "--", "true"], "--limit"),
]


class CommandLine(RedisTestCase):
    def assert_usage_error(self, args, needle):
        r = self.run_rlock(args)
        self.assertEqual(r.returncode, 64, f"{args}: {r.stderr}")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, f"{args}: want one line, got {r.stderr!r}")
        self.assertTrue(lines[0].startswith("rlock: error: "), lines[0])
        self.assertIn(needle, lines[0])
        self.assertEqual(r.stdout, "")
        self.assertEqual(self.server.cmd("DBSIZE"), 0, f"{args} wrote to Redis")

    def test_bad_run_input(self):
        for args, needle in BAD_RUN_INPUT:
            with self.subTest(args=args):
                self.assert_usage_error(["run"] + args, needle)

    def test_bad_top_level_input(self):
        self.assert_usage_error([], "no command given (commands: run, status")
        self.assert_usage_error(["--redis", self.server.url], "no command given")
        self.assert_usage_error(["--ttl", "5s", "status", "k"], "rlock status takes no --ttl")
        self.assert_usage_error(["--bogus", "status", "k"], "unknown option '--bogus'")
        self.assert_usage_error(["frobnicate"], "frobnicate")
        self.assert_usage_error(["help", "frobnicate"], "no command 'frobnicate'")

    def test_options_every_command_takes_work_before_it(self):
        """rlock --redis URL status KEY, as git and kubectl take them: every verb, the same
        meaning and precedence as after it."""
        env = rlock_env()  # no RLOCK_REDIS_URL: only the flag before the verb names Redis
        url = ["--redis", self.server.url]
        token = run_rlock(url + ["acquire", "k"], env=env).stdout.strip()
        self.assertEqual(len(token), 32)
        cases = [
            (url + ["-q", "status", "k"], 0),
            (["-u", self.server.url, "inspect", "k"], 0),
            ([f"--redis={self.server.url}", "--json", "list"], 0),
            (url + ["-v", "extend", "k", "--token", token], 0),
            (url + ["history", "k"], 0),
            (url + ["watch", "--no-such-flag", "k"], 64),
            (url + ["--json", "config"], 0),
            (url + ["-q", "run", "-n", "k", "--", "true"], 75),
            (url + ["release", "k", "--token", token], 0),
            (url + ["--prefix", "p:", "run", "k", "--", "true"], 0),
            (url + ["reset-period", "k", "--once-per", "day"], 1),
            (["--log-format", "json"] + url + ["acquire", "--ttl", "5s", "k2"], 0),
        ]
        for args, status in cases:
            with self.subTest(args=args):
                r = run_rlock(args, env=env)
                self.assertEqual(r.returncode, status, r.stderr)
                self.assertNotIn("default_redis", r.stderr)
        # --json before the verb is the verb's own.
        self.assertTrue(run_rlock(url + ["--json", "status", "k2"], env=env).stdout.startswith("{"))
        # The flag still wins over the environment, wherever it is typed.
        wrong = rlock_env(RLOCK_REDIS_URL=f"redis://127.0.0.1:{free_port()}")
        self.assertEqual(run_rlock(url + ["status", "k2"], env=wrong).returncode, 0)
        # -q and -v typed on either side of the verb still exclude each other.
        r = run_rlock(url + ["-q", "status", "-v", "k2"], env=env)
        self.assertEqual(r.returncode, 64)
        self.assertIn("exclude each other", r.stderr)

    def test_bad_url_is_78_and_never_shows_the_password(self):
        r = self.run_rlock(["run", "--redis", "redis://app:hunter2@127.0.0.1:notaport", "k", "--", "true"])
        self.assertEqual(r.returncode, 78)
        self.assertNotIn("hunter2", r.stderr + r.stdout)
        self.assertIn("port 'notaport'", r.stderr)

    def test_wrong_password_is_69_and_never_shows_it(self):
        url = f"redis://:hunter2@127.0.0.1:{self.server.port}"
        r = self.run_rlock(["run", "--redis", url, "k", "--", "true"])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertNotIn("hunter2", r.stderr + r.stdout)

    def test_help_and_version(self):
        r = self.run_rlock(["--help"])
        self.assertEqual(r.returncode, 0)
        for command in ("run", "status", "inspect", "history", "watch", "list", "acquire",
                        "extend", "release", "reset-period", "config", "help"):
            self.assertRegex(r.stdout, rf"\n  {command} ")
        self.assertEqual(self.run_rlock(["help"]).stdout, r.stdout)
        r = self.run_rlock(["run", "--help"])
        self.assertEqual(r.returncode, 0)
        for flag in ("--wait", "--no-wait", "--conflict-exit-code", "--ttl", "--max-run",
                     "--kill-signal", "--kill-after", "--on-lost", "--min-hold", "--redis"):
            self.assertIn(flag, r.stdout)
        self.assertEqual(self.run_rlock(["help", "run"]).stdout, r.stdout)
        # The usage says how the command is given, which CLI11 alone would not.
        self.assertIn("Usage: rlock run [OPTIONS] KEY -- COMMAND [ARG...]\n"
                      "   or: rlock run [OPTIONS] KEY -c 'SHELL TEXT'\n", r.stdout)
        self.assertIn("Usage: rlock release [OPTIONS] KEY --token T\n",
                      self.run_rlock(["release", "--help"]).stdout)
        self.assertIn("Usage: rlock help [OPTIONS] [COMMAND]\n",
                      self.run_rlock(["help", "--help"]).stdout)
        # --version is rlock's, not a command's.
        self.assertEqual(self.run_rlock(["run", "--version"]).returncode, 64)
        r = self.run_rlock(["--version"])
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^rlock \d+\.\d+\.\d+ \(hiredis \d+\.\d+")


class ConfigDefaults(unittest.TestCase):
    """rlock config shows the value a run would use where a default follows from other
    settings, not a blank."""

    def config(self, *args):
        r = run_rlock(["config", "--json", *args], env=rlock_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["settings"]

    def test_derived_defaults(self):
        s = self.config("--ttl", "9s", "--redis", "redis://127.0.0.1:1")
        self.assertEqual(s["kill-after"]["value"], "3s")
        self.assertEqual(s["tz"]["value"], "UTC")
        self.assertEqual(s["min-replicas"]["value"], "0")
        self.assertEqual(s["kill-after"]["origin"], "default")
        self.assertEqual(self.config()["kill-after"]["value"], "5s")
        sentinel = self.config("--redis", "redis-sentinel://127.0.0.1:26379/mymaster")
        self.assertEqual(sentinel["min-replicas"]["value"], "1")
        # Given, they are the flag's.
        given = self.config("--kill-after", "1s", "--tz", "Europe/Berlin")
        self.assertEqual((given["kill-after"]["value"], given["kill-after"]["origin"]),
                         ("1s", "flag"))
        self.assertEqual(given["tz"]["value"], "Europe/Berlin")
        text = run_rlock(["config", "--ttl", "9s"], env=rlock_env()).stdout
        self.assertRegex(text, r"\nkill-after +3s +default \(5s, or ttl/3 when shorter\)\n")

    def test_a_flag_takes_the_value_it_is_given(self):
        # --fair=false is off (it was on: the value was not looked at), as 0, no and off are.
        for value, meant in (("false", "false"), ("0", "false"), ("no", "false"),
                             ("off", "false"), ("true", "true"), ("yes", "true")):
            with self.subTest(value=value):
                fair = self.config(f"--fair={value}")["fair"]
                self.assertEqual((fair["value"], fair["origin"]), (meant, "flag"))
        self.assertEqual(self.config("--fair", "--fair=false")["fair"]["value"], "false")


if __name__ == "__main__":
    unittest.main()
