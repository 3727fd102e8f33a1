"""The command line: bad input is one clear line, the documented exit status, nothing in Redis."""
import json
import os
import re
import unittest

from harness import RLOCK, RedisTestCase, free_port, rlock_env, run_rlock, sampled, wait_until

BAD_RUN_INPUT = [
    # (arguments after "run", what the one line must mention)
    (["", "--", "true"], "KEY must not be empty"),
    (["k"], "missing command"),
    (["k", "--"], "missing command"),
    (["k", "true"], "unexpected argument 'true': put the command after --"),
    (["--bogus", "k", "--", "true"], "unknown option '--bogus'"),
    (["--ttl", "0", "k", "--", "true"], "--ttl"),
    (["--ttl", "abc", "k", "--", "true"], "bad duration 'abc'"),
    (["--ttl", "-5s", "k", "--", "true"], "--ttl"),
    (["--ttl", "10ms", "k", "--", "true"], "at least"),
    (["--ttl", "99999d", "k", "--", "true"], "--ttl: '99999d' is too long: at most 3660d"),
    (["--wait", "100000d", "k", "--", "true"], "--wait: '100000d' is too long: at most 3660d, or inf"),
    (["--max-run", "3660d1s", "k", "--", "true"], "--max-run: '3660d1s' is too long: at most 3660d"),
    (["--retention", "87841h", "k", "--", "true"], "--retention: '87841h' is too long"),
    (["--once-per", "100000d", "k", "--", "true"], "--once-per: '100000d' is too long: at most"),
    (["--ttl", "100000dx", "k", "--", "true"], "bad duration '100000dx' (500ms"),
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
    (["-q", "-v", "k", "--", "true"], "excludes quiet"),
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
        self.assert_usage_error(["help", "frobnicate"], "unknown command 'frobnicate' (commands: run, ")

    def test_words_past_the_arguments_are_named_as_typed(self):
        """rlock run KEY echo a b c, the common mistake of no '--': the words in the order
        typed, and where the command goes; every other verb with arguments says what it takes."""
        cases = [
            (["run", "k", "echo", "a", "b", "c"],
             "unexpected arguments 'echo a b c': put the command after --, as in rlock run KEY "
             "-- COMMAND; see 'rlock run --help'"),
            (["run", "-w", "5s", "k", "ls", "-l"], "unexpected arguments 'ls -l': put the command"),
            (["status", "k", "--", "true"], "'--' COMMAND is only for rlock run"),
            (["inspect", "k", "x", "y"], "unexpected arguments 'x y': rlock inspect takes one KEY"),
            (["history", "k", "x"], "unexpected argument 'x': rlock history takes one KEY"),
            (["acquire", "k", "x", "y", "z"],
             "unexpected arguments 'x y z': rlock acquire takes one KEY"),
            (["extend", "k", "x", "--token", "t"], "unexpected argument 'x': rlock extend takes"),
            (["release", "k", "x", "--force"], "unexpected argument 'x': rlock release takes one KEY"),
            (["check", "k", "x", "--every", "1d"], "unexpected argument 'x': rlock check takes"),
            (["reset-period", "k", "x", "--once-per", "day"],
             "unexpected argument 'x': rlock reset-period takes one KEY"),
            (["list", "a", "b", "c"], "unexpected arguments 'b c': rlock list takes one PATTERN"),
            (["completion", "bash", "zsh"],
             "unexpected argument 'zsh': rlock completion takes one SHELL"),
            (["config", "x"], "unexpected argument 'x': rlock config takes no arguments"),
            (["help", "run", "x"], "unexpected argument 'x': rlock help takes one COMMAND"),
            # An assignment's value may be a secret: its name only.
            (["run", "k", "PGPASSWORD=s3cret", "psql"],
             "unexpected arguments 'PGPASSWORD=... psql': put the command after --"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                self.assert_usage_error(args, needle)
        r = run_rlock(["run", "k", "PGPASSWORD=s3cret", "psql"])
        self.assertNotIn("s3cret", r.stdout + r.stderr)

    def test_a_value_that_took_the_next_word_is_named(self):
        """run -w KEY -- CMD: -w took the key for its value. The value is the mistake to name
        (as flock says "invalid timeout value"), not the KEY it left missing; for every option
        of a duration, a number or a period that can swallow an argument."""
        cases = [
            (["run", "-w", "k", "--", "true"],
             "--wait: bad duration 'k' (500ms, 30s, 5m, 1h30m, 2d; a bare number is seconds), "
             "or inf"),
            (["run", "--timeout", "k", "--", "true"], "--wait: bad duration 'k'"),
            (["run", "--ttl", "k", "--", "true"], "--ttl: bad duration 'k'"),
            (["run", "--max-run", "k", "--", "true"], "--max-run: bad duration 'k'"),
            (["run", "--min-hold", "k", "--", "true"], "--min-hold: bad duration 'k'"),
            (["run", "--kill-after", "k", "--", "true"], "--kill-after: bad duration 'k'"),
            (["run", "--retention", "k", "--", "true"], "--retention: bad duration 'k'"),
            (["run", "--command-timeout", "k", "--", "true"], "--command-timeout: bad duration"),
            (["run", "-E", "k", "--", "true"], "--conflict-exit-code: 'k' is not an exit status"),
            (["run", "--limit", "k", "--", "true"], "--limit: 'k' is not a number of holders"),
            (["run", "--min-replicas", "k", "--", "true"], "--min-replicas: 'k' is not a number"),
            (["run", "--history-length", "k", "--", "true"], "--history-length: 'k' is not"),
            (["run", "--once-per", "k", "--", "true"], "--once-per: 'k' is neither hour"),
            (["run", "--kill-signal", "k", "--", "true"], "--kill-signal: unknown signal 'k'"),
            (["run", "k", "-w"], "--wait: 1 required D missing"),
            (["acquire", "--ttl", "k"], "--ttl: bad duration 'k'"),
            (["acquire", "--while-pid", "k"],
             "--while-pid: 'k' is not a whole number from 1 to 4194304"),
            (["extend", "--ttl", "k", "--token", "t"], "--ttl: bad duration 'k'"),
            (["history", "-n", "k"], "--count: 'k' is not a whole number from 1 to 100000"),
            (["history", "k", "-n", "0"], "--count: '0' is not a whole number from 1 to 100000"),
            (["check", "--every", "k"], "--every 'k' is neither hour"),
            (["reset-period", "--once-per", "k"], "--once-per: 'k' is neither hour"),
            # A good value leaves the argument missing; --kill-after's bound needs the ttl,
            # which may come from elsewhere, so it is not judged alone.
            (["run", "-w", "5s", "--", "true"], "KEY is required"),
            (["run", "--ttl", "1m", "--kill-after", "40s", "--", "true"], "KEY is required"),
        ]
        for args, needle in cases:
            with self.subTest(args=args):
                self.assert_usage_error(args, needle)

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
        self.assertIn("--verbose: excludes quiet (--quiet)", r.stderr)

    def test_a_flag_wins_over_the_config_file(self):
        # quiet, verbose and shared in the file are defaults that -v, -q and -x override, as
        # every setting is: "flag > environment > file > default".
        def run(config, *args):
            path = self.path("config.toml")
            with open(path, "w") as f:
                f.write(config)
            return self.run_rlock(["run", "--config", path, *args, "k", "--", "true"])
        r = run("quiet = true\n", "-v")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("acquired", r.stderr)
        r = run("verbose = true\n", "-q")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        r = run("quiet = true\nverbose = true\n")
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertRegex(r.stderr, r"config.toml:2:1: verbose: excludes quiet \(.*config.toml:1:1\)")
        # -x over shared = true: the lock is held alone, so a --shared holder is refused.
        path = self.path("shared.toml")
        with open(path, "w") as f:
            f.write("shared = true\n")
        holder = self.start(["run", "--config", path, "-x", "k", "--", "sleep", "30"])
        self.addCleanup(holder.kill)
        wait_until(lambda: self.server.cmd("EXISTS", "k") == 1, 10, "the -x holder")
        self.assertEqual(self.server.cmd("TYPE", "k"), "string")  # a shared lock is a hash
        r = self.run_rlock(["run", "--shared", "k", "--", "true"])
        self.assertEqual(r.returncode, 75, r.stderr)

    def test_options_that_take_a_value_for_their_command_work_before_it(self):
        """-n is history's --count N but run's --no-wait: what takes a value before the verb is
        what that verb's declaration says (these exited 64 before)."""
        url = ["--redis", self.server.url]
        self.assertEqual(run_rlock(url + ["run", "k", "--", "true"]).returncode, 0)
        for args in (["--count", "5", "history", "k"], ["-n", "5", "history", "k"],
                     ["-n", "5", "history", "--json", "k"]):
            with self.subTest(args=args):
                r = run_rlock(url + args)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout, run_rlock(url + args[2:] + args[:2]).stdout)
                self.assertIn("exit 0" if "--json" not in args else '"exit_status": 0', r.stdout)
        r = run_rlock(url + ["-c", "echo ran", "run", "k"])
        self.assertEqual((r.returncode, r.stdout), (0, "ran\n"), r.stderr)
        r = run_rlock(url + ["-c", "true", "run", "k"])
        self.assertEqual(r.returncode, 0, r.stderr)
        # run's -n is a flag: the verb after it, not a value.
        self.assertEqual(run_rlock(url + ["-n", "run", "k", "--", "true"]).returncode, 0)
        # A value that is a command's name is still the value: --prefix status status k.
        r = run_rlock(url + ["--prefix", "status", "status", "k"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertTrue(r.stdout.startswith("statusk "), r.stdout)

    def test_every_option_of_every_command_works_before_it(self):
        """Each option of each command (its declarations, as `rlock completion fish` prints
        them), typed before the command, does what it does after it: the same exit status and
        output, never "unknown command" or "not expected". Against a Redis that refuses
        connections, with "x" for every value: a usage error names the option as the command's."""
        import os
        import re
        import tempfile
        r = run_rlock(["completion", "fish"])
        self.assertEqual(r.returncode, 0, r.stderr)
        options = {}  # verb -> [(name, takes a value)]
        for line in r.stdout.splitlines():
            m = re.match(r"complete -c rlock -n '__fish_seen_subcommand_from ([\w-]+)' (.*)", line)
            if not m or " -d " not in m.group(2):
                continue
            spec = m.group(2).split(" -d ")[0]
            names = ["-" + n for n in re.findall(r"-s (\w)", spec)]
            names += ["--" + n for n in re.findall(r"-l ([\w-]+)", spec)]
            valued = " -x" in spec or " -r" in spec
            options.setdefault(m.group(1), []).extend((n, valued) for n in names)
        token = "0" * 32
        base = {"run": ["k", "--", "true"], "status": ["k"], "inspect": ["k"], "history": ["k"],
                "check": ["k", "--every", "1d"], "watch": ["k"], "list": [], "acquire": ["k"],
                "extend": ["k", "--token", token], "release": ["k", "--token", token],
                "reset-period": ["k", "--once-per", "day"], "config": [], "stop": ["k"],
                "pause": ["k", "--for", "1m"], "resume": ["k"], "logs": ["k"], "doctor": []}
        self.assertEqual(sorted(options), sorted(base))
        self.assertGreater(len(options["run"]), 50)
        down = rlock_env(RLOCK_REDIS_URL=f"redis://127.0.0.1:{free_port()}")
        tried = 0
        with tempfile.TemporaryDirectory() as cwd:
            for verb, names in options.items():
                for name, valued in names:
                    option = [name, "x"] if valued else [name]
                    args = list(base[verb])
                    for word in ("--every", "--token", "--once-per"):
                        if word in args and name.startswith("--") and word.startswith(name):
                            del args[args.index(word):args.index(word) + 2]
                    if name in ("-c", "--command"):
                        args = ["k"]
                    tried += 1
                    if not sampled(tried):
                        continue
                    with self.subTest(verb=verb, option=option):
                        before = run_rlock(option + [verb] + args, env=down, cwd=cwd, timeout=30)
                        after = run_rlock([verb] + option + args, env=down, cwd=cwd, timeout=30)
                        for bad in ("unknown command", "not expected", "takes no"):
                            self.assertNotIn(bad, before.stderr)
                        self.assertEqual((before.returncode, before.stdout, before.stderr),
                                         (after.returncode, after.stdout, after.stderr))
        self.assertGreater(tried, 300)

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
        self.assertIn("Usage: rlock help [COMMAND]\n", self.run_rlock(["help", "--help"]).stdout)
        # --version is rlock's, not a command's.
        self.assertEqual(self.run_rlock(["run", "--version"]).returncode, 64)
        r = self.run_rlock(["--version"])
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^rlock \d+\.\d+\.\d+(~dev\d+\+g[0-9a-f]{12})? \(hiredis \d+\.\d+")


    def test_a_typo_gets_a_suggestion(self):
        # As git's "did you mean": a mistyped command, option or config key is named with the
        # one it was likely meant as; a word like none gets the list. Nothing reaches Redis.
        for args, said in ((["stauts", "k"], "unknown command 'stauts': did you mean status?"),
                           (["help", "stpo"], "did you mean stop?"),
                           (["run", "--wiat", "5", "k", "--", "true"],
                            "unknown option '--wiat': did you mean --wait?"),
                           (["status", "--jsno", "k"], "did you mean --json?")):
            r = self.run_rlock(args)
            self.assertEqual((r.returncode, len(r.stderr.splitlines())), (64, 1), r.stderr)
            self.assertIn(said, r.stderr)
        r = self.run_rlock(["xyzzy"])
        self.assertNotIn("did you mean", r.stderr)
        self.assertIn("(commands: run, ", r.stderr)
        import tempfile
        for key, meant in (("redis-url", "redis"), ("kill_after", "kill-after"),
                           ("retyr", "retry")):
            with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
                f.write(f'{key} = "1s"\n')
                f.flush()
                r = self.run_rlock(["run", "--config", f.name, "k", "--", "true"])
            self.assertEqual(r.returncode, 78, r.stderr)
            self.assertIn(f"unknown key '{key}': did you mean '{meant}'? (keys: redis, ", r.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
            f.write('command = "make"\n')
            f.flush()
            r = self.run_rlock(["run", "--config", f.name, "k", "--", "true"])
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("the job is given on the command line", r.stderr)
        self.assertEqual(self.server.cmd("KEYS", "*"), [])

    def test_help_on_a_terminal_opens_the_page(self):
        # As git help: on a terminal, rlock help VERB is rlock-VERB(1) through man when that
        # page is installed; else, and off a terminal, the --help text.
        import pty
        import tempfile
        pages = tempfile.mkdtemp(prefix="rlock-man-")
        os.makedirs(os.path.join(pages, "man1"))
        with open(os.path.join(pages, "man1", "rlock-status.1"), "w") as f:
            f.write(".TH RLOCK-STATUS 1\n.SH NAME\nrlock-status \\- the page itself\n")
        env = rlock_env(MANPATH=pages, MANPAGER="cat", PAGER="cat", MANWIDTH="80")

        def on_a_terminal(args):
            import select
            import time
            pid, fd = pty.fork()
            if pid == 0:
                try:
                    os.execve(RLOCK, [RLOCK] + args, env)
                finally:
                    os._exit(127)
            out, deadline = b"", time.monotonic() + 20  # a pager left waiting is a failure
            while time.monotonic() < deadline:
                ready, _, _ = select.select([fd], [], [], 1)
                try:
                    chunk = os.read(fd, 4096) if ready else b""
                except OSError:
                    break
                if ready and not chunk:
                    break
                out += chunk
            else:
                os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(fd)
            return out.decode(errors="replace")

        self.assertIn("the page itself", on_a_terminal(["help", "status"]))
        self.assertIn("Usage: rlock inspect", on_a_terminal(["help", "inspect"]))  # no page
        piped = run_rlock(["help", "status"], env=env)
        self.assertIn("Usage: rlock status", piped.stdout)

    def test_help_teaches(self):
        # Each command's help: within 80 columns, no parser's words, examples before the exit
        # statuses; run's most used options first; the overview groups the commands.
        overview = self.run_rlock(["--help"]).stdout
        for heading in ("Run a job:", "Look (read only):", "Act on a lock or a job:",
                        "Hold a lock in a script:", "Set up:"):
            self.assertIn("\n" + heading + "\n", overview)
        self.assertIn("rlock -u redis://", overview)
        verbs = re.findall(r"^  ([a-z-]+)  ", overview, re.M)
        self.assertGreater(len(verbs), 15)
        for verb in verbs + ["connection"]:
            text = self.run_rlock(["help", verb]).stdout
            wide = [line for line in text.splitlines() if len(line) > 80]
            self.assertEqual(wide, [], verb)
            for jargon in ("REQUIRED", "INT in", "TEXT:", "Positionals", "Print this help"):
                self.assertNotIn(jargon, text, verb)
            if verb not in ("help", "connection"):
                self.assertRegex(text, r"\nExamples:\n  [^\n]*rlock [^\n]+\n(  [^\n]+\n)*\nExit status:",
                                 verb)
        run = self.run_rlock(["run", "--help"]).stdout
        most = run.split("\nMost used:\n")[1].split("\n\n")[0]
        for flag in ("--wait", "--once-per", "--max-run", "--retry-failed", "--quiet",
                     "--conflict-exit-code"):
            self.assertIn(flag, most)
        self.assertLess(run.index("Most used:"), run.index("The lock, and waiting for it:"))
        self.assertEqual(run.count("--once-per PERIOD"), 1)  # shown once, among the most used
        words = " ".join(run.split())
        self.assertIn("at least 100ms", words)
        self.assertIn("1k to 16M, or 0 for none", words)
        self.assertIn("1 behind Sentinel", words)
        self.assertIn("XDG_CONFIG_HOME", self.run_rlock(["help", "connection"]).stdout)


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
