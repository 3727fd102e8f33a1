"""What others see: text output that an operator reads on a terminal cannot be reordered by
Unicode's bidirectional characters nor driven by C1 controls, JSON gives back the exact bytes of
a key, long keys stay apart, a config file others can change cannot make rlock run a command,
and a password is neither printed with a failing command nor left in rlock's arguments (man
rlock, DESCRIPTION, CONFIGURATION, JSON OUTPUT, --redis, --password-command)."""
import base64
import hashlib
import json
import os
import pwd
import signal
import stat
import subprocess
import unittest

from harness import RLOCK, RedisTestCase, processes_left, rlock_env, wait_until
from test_watch import Lines

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
LRI = "\u2066"  # LEFT-TO-RIGHT ISOLATE
CSI = "\u009b"  # a C1 control
RAW = (RLO, LRI, CSI, "\u200f", "\u061c")
RLO_TEXT = "\\xe2\\x80\\xae"  # RLO as text output shows it
CSI_TEXT = "\\xc2\\x9b"

KEY = "lock:" + RLO + "gnp.exe" + LRI + CSI
HOST = "web" + RLO + "1-" + CSI
ESCAPED_KEY = "lock:" + RLO_TEXT + "gnp.exe\\xe2\\x81\\xa6" + CSI_TEXT

JOB = """#!/bin/sh
printf 'out\\342\\200\\256\\302\\233put\\n'
touch "$T/started"
while [ ! -e "$T/go" ]; do sleep 0.05; done
"""


class BidiAndControls(RedisTestCase):

    def env(self, host="ops-1", **extra):
        return rlock_env(self.server, RLOCK_HOSTNAME=host, T=self.tmp, **extra)

    def rlock(self, *args, host="ops-1", code=0):
        r = self.run_rlock(list(args), env=self.env(host))
        if code is not None:
            self.assertEqual(r.returncode, code, f"{args}: {r.stderr}")
        return r.stdout + r.stderr

    def assert_escaped(self, what, text):
        for c in RAW:
            self.assertNotIn(c, text, f"{what} printed U+{ord(c):04X} raw: {text!r}")

    def start_job(self):
        job = self.path("job" + RLO + "fdp.sh")
        with open(job, "w") as f:
            f.write(JOB)
        os.chmod(job, 0o755)
        self.start(["run", "--keep-output", "4k", KEY, "--", job], env=self.env(HOST),
                   stdout=subprocess.DEVNULL)
        self.wait_file_exists("started")

    def wait_file_exists(self, name):
        wait_until(lambda: os.path.exists(self.path(name)), 10, name)

    def test_every_text_verb_escapes_bidi_and_c1_in_keys_hosts_commands_reasons_and_output(self):
        self.start_job()
        seen = {}
        watch = self.start(["watch", KEY], env=self.env())
        watch_lines = Lines(watch)
        follow = self.start(["logs", "-f", KEY], env=self.env())
        for verb in (["status", KEY], ["inspect", KEY], ["list"]):
            seen[verb[0]] = self.rlock(*verb)
        self.assertIn(ESCAPED_KEY, seen["status"])
        self.assertIn("web" + RLO_TEXT + "1-" + CSI_TEXT, seen["status"])
        self.assertIn("job" + RLO_TEXT + "fdp.sh", seen["inspect"])
        seen["watch"] = "\n".join(watch_lines.until(lambda line: "web" + RLO_TEXT in line))
        seen["pause"] = self.rlock("pause", KEY, "--for", "10m", "--reason",
                                  "db" + RLO + "x\u200f\u061c")
        seen["paused status"] = self.rlock("status", KEY)
        self.assertIn("db" + RLO_TEXT + "x\\xe2\\x80\\x8f\\xd8\\x9c", seen["paused status"])
        seen["stop"] = self.rlock("stop", KEY, "--reason", "why" + LRI + CSI)
        out, err = follow.communicate(timeout=10)
        seen["logs -f"] = out + err
        self.assertIn("out" + RLO_TEXT + CSI_TEXT + "put\n", out)
        watch.send_signal(signal.SIGINT)
        seen["watch"] += watch.communicate(timeout=10)[1]
        seen["logs"] = self.rlock("logs", KEY)
        self.assertIn("out" + RLO_TEXT + CSI_TEXT + "put\n", seen["logs"])
        seen["history"] = self.rlock("history", KEY)
        seen["check"] = self.rlock("check", KEY, "--every", "1h", code=None)
        seen["stopped status"] = self.rlock("status", KEY, code=1)
        self.assertIn("why\\xe2\\x81\\xa6" + CSI_TEXT, seen["stopped status"])
        seen["resume"] = self.rlock("resume", KEY)
        for what, text in seen.items():
            self.assert_escaped(what, text)
        # --raw is the operator's choice: the bytes as the command wrote them.
        raw = self.run_rlock(["logs", "--raw", KEY], env=self.env())
        self.assertIn("out" + RLO + CSI + "put\n", raw.stdout)

    def test_json_writes_c1_and_bidi_as_u_sequences(self):
        self.start_job()
        documents = [self.rlock("status", "--json", KEY), self.rlock("inspect", "--json", KEY),
                     self.rlock("list", "--json")]
        for text in documents:
            self.assert_escaped("JSON", text)
            self.assertIn("\\u202e", text)
            self.assertIn("\\u009b", text)
        lock = json.loads(documents[0])["locks"][0]
        self.assertEqual((lock["key"], lock["holder"]["host"]), (KEY, HOST))
        with open(self.path("go"), "w"):
            pass


class RawBytesAndLongKeys(RedisTestCase):

    def test_a_key_that_is_not_utf8_is_given_back_whole_by_json(self):
        key = b"lock:\xff\xfe-" + RLO.encode() + b"\xc3"
        r = subprocess.run([RLOCK, "acquire", key], env=rlock_env(self.server),
                           capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        token = r.stdout.decode().strip()
        listed = self.run_rlock(["list", "--json"])
        lock = json.loads(listed.stdout)["locks"][0]
        self.assertIn("\ufffd", lock["key"])
        self.assertIn("\\u202e", listed.stdout)
        back = base64.b64decode(lock["key_base64"])
        self.assertEqual(back, key)
        self.assertIsNotNone(self.server.cmd("GET", back))
        history = subprocess.run([RLOCK, "history", "--json", key], env=rlock_env(self.server),
                                 capture_output=True)
        self.assertEqual(base64.b64decode(json.loads(history.stdout)["key_base64"]), key)
        # The key from JSON is the key: the lock is given back with it.
        r = subprocess.run([RLOCK, "release", back, "--token", token],
                           env=rlock_env(self.server), capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNone(self.server.cmd("GET", back))
        # A key that is valid UTF-8 has no such field.
        self.run_rlock(["acquire", "lock:plain"])
        self.assertNotIn("_base64", self.run_rlock(["list", "--json"]).stdout)

    def test_history_check_and_watch_json_escape_hosts_and_give_back_keys(self):
        key = b"lock:\xff-" + RLO.encode() + b"\xc2\x85"
        host = "web" + RLO + "1\u0085" + CSI
        env = rlock_env(self.server, RLOCK_HOSTNAME=host)
        arg = os.fsdecode(key)

        def rlock(*args):
            r = subprocess.run([RLOCK, *args], env=env, capture_output=True)
            self.assertIn(r.returncode, (0, 1), r.stderr)
            for raw in (b"\xe2\x80\xae", b"\xc2\x85", b"\xc2\x9b", b"\xff"):
                self.assertNotIn(raw, r.stdout, f"{args} wrote {raw!r} raw")
            return r.stdout.decode()

        empty = json.loads(rlock("history", "--json", key))
        self.assertEqual(base64.b64decode(empty["key_base64"]), key)
        watch = self.start(["watch", "--json", arg], env=env)
        lines = Lines(watch)
        lines.until(lambda line: '"watching"' in line)
        self.assertEqual(subprocess.run([RLOCK, "run", key, "--", "true"], env=env).returncode, 0)
        seen = lines.until(lambda line: '"released"' in line)
        watch.send_signal(signal.SIGINT)
        watch.communicate(timeout=10)
        for line in seen:
            self.assertNotIn(RLO, line)
            self.assertNotIn("\u0085", line)
        events = [json.loads(line) for line in seen]
        taken = [e for e in events if e["event"] == "taken"][0]
        self.assertEqual(taken["holder"]["host"], host)
        self.assertEqual(base64.b64decode(taken["key_base64"]), key)
        history = json.loads(rlock("history", "--json", key))
        self.assertEqual(sorted(history), sorted(empty))  # one schema, whatever the data
        self.assertEqual(base64.b64decode(history["key_base64"]), key)
        self.assertEqual(history["runs"][0]["holder"]["host"], host)
        check = json.loads(rlock("check", "--json", "--every", "1h", key))
        self.assertEqual(base64.b64decode(check["key_base64"]), key)
        self.assertEqual(check["last_run"]["host"], host)

    def test_release_force_all_escapes_the_members_it_names(self):
        member = "\x1b[31m" + RLO + "\u0085tok"
        expiry = int(self.server.cmd("TIME")[0]) * 1000 + 60000
        self.server.cmd("ZADD", "{semk}:rlock:sem", str(expiry), member)
        r = self.run_rlock(["release", "--force", "--all", "semk"])
        self.assertEqual(r.returncode, 0, r.stderr)
        for raw in ("\x1b", RLO, "\u0085"):
            self.assertNotIn(raw, r.stdout + r.stderr)
        self.assertIn("\\x1b[31m\\xe2\\x80\\xae\\xc2\\x85tok", r.stdout)

    def test_logs_names_a_long_key_as_every_verb_does(self):
        key = "lock:" + "y" * 90
        r = self.run_rlock(["run", "--keep-output", "4k", key, "--", "echo", "hi"])
        self.assertEqual(r.returncode, 0, r.stderr)
        index = [k for k in self.server.cmd("KEYS", "*rlock*outputs") if key in k]
        self.assertEqual(len(index), 1)
        for i in range(6):  # more runs than rlock keeps: logs says it read only the newest
            self.server.cmd("ZADD", index[0], str(i + 1), f"{i + 1} rlock/1 x")
        r = self.run_rlock(["logs", key])
        cut = key[:80] + "...#" + hashlib.sha1(key.encode()).hexdigest()[:8]
        self.assertIn(f"rlock: {cut}: the index of kept outputs holds", r.stderr)

    def test_keys_that_differ_by_what_does_not_show_read_as_two(self):
        keys = ["lock:a", "lock:\u200ba", "lock:a\ufeff", "lock:\u2028a", "a\\x1b", "a\x1b"]
        for key in keys:
            self.assertEqual(self.run_rlock(["acquire", key]).returncode, 0)
        shown = [line.split()[0] for line in self.run_rlock(["list"]).stdout.splitlines()]
        self.assertEqual(len(set(shown)), len(keys), shown)
        self.assertIn("lock:\\xe2\\x80\\x8ba", shown)
        self.assertIn("a\\\\x1b", shown)  # the key spelled with a backslash
        self.assertIn("a\\x1b", shown)  # the key with ESC
        status = self.run_rlock(["status", "--json", "lock:\u200ba"]).stdout
        self.assertIn("\\u200b", status)
        self.assertNotIn("\u200b", status)

    def test_keys_that_share_their_first_80_characters_read_as_two(self):
        same = "lock:" + "x" * 90
        keys = [same + "-a", same + "-b", "k" * 80]
        for key in keys:
            self.assertEqual(self.run_rlock(["acquire", key]).returncode, 0)
        listed = self.run_rlock(["list"]).stdout.splitlines()
        shown = sorted(line.split()[0] for line in listed)
        self.assertEqual(len(set(shown)), 3, listed)
        for key in keys[:2]:
            cut = key[:80] + "...#" + hashlib.sha1(key.encode()).hexdigest()[:8]
            self.assertIn(cut, shown)
            self.assertIn(cut, self.run_rlock(["status", key]).stdout)
        self.assertIn("k" * 80, shown)  # 80 characters are shown whole


class ConfigFileAccess(RedisTestCase):

    def config(self, text, mode=0o600, directory=None):
        directory = directory or self.tmp
        path = os.path.join(directory, "config.toml")
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def run_with(self, path, *args):
        return self.run_rlock(["--config", path, *args], env=rlock_env(self.server))

    def assert_refused(self, path, *words):
        touched = self.path("ran")
        r = self.run_with(path, "run", "lock:cfg", "--", "touch", touched)
        self.assertEqual(r.returncode, 78, r.stderr)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        for word in (path,) + words:
            self.assertIn(word, lines[0])
        self.assertFalse(os.path.exists(touched))
        self.assertEqual(self.server.cmd("KEYS", "*"), [])

    def test_a_password_others_can_read_is_a_warning_and_the_run_goes_on(self):
        self.server.cmd("ACL", "SETUSER", "cfg-user", "on", ">Cfg-Pw-61", "~*", "&*", "+@all")
        path = self.config(f'redis = "redis://cfg-user:@127.0.0.1:{self.server.port}"\n'
                           'password = "Cfg-Pw-61"\n', 0o644)
        args = ["--config", path, "run", "lock:cfg", "--", "true"]
        r = self.run_rlock(args, env=rlock_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.splitlines(), [
            f"rlock: warning: config file {path} holds a password and can be read by others "
            "(mode 0644); chmod 600 it"])
        os.chmod(path, 0o600)
        r = self.run_rlock(args, env=rlock_env())
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_a_command_in_a_file_others_can_change_is_refused(self):
        for setting in ('password-command = "echo pw"', 'notify = "touch notified"'):
            with self.subTest(setting=setting):
                path = self.config(setting + "\n", 0o666)
                self.assert_refused(path, "mode 0666", setting.split()[0])
                open_dir = os.path.join(self.tmp, "open")
                os.makedirs(open_dir, exist_ok=True)
                os.chmod(open_dir, 0o777)
                path = self.config(setting + "\n", 0o600, open_dir)
                self.assert_refused(path, f"{open_dir} is mode 0777 without the sticky bit")
        # The same file, that only its owner can change, is taken; so is one in a sticky
        # directory such as /tmp.
        path = self.config('notify = "true"\n', 0o644)
        self.assertEqual(self.run_with(path, "run", "lock:cfg", "--", "true").returncode, 0)
        sticky = os.path.join(self.tmp, "sticky")
        os.mkdir(sticky)
        os.chmod(sticky, 0o1777)
        path = self.config('notify = "true"\n', 0o600, sticky)
        self.assertEqual(self.run_with(path, "run", "lock:cfg", "--", "true").returncode, 0)

    @unittest.skipUnless(os.geteuid() == 0, "chown needs root")
    def test_a_command_in_another_users_file_is_refused(self):
        nobody = pwd.getpwnam("nobody").pw_uid
        path = self.config('notify = "true"\n', 0o600)
        os.chown(path, nobody, -1)
        self.assert_refused(path, "owned by nobody")


class SecretsOfCommandsAndUrls(RedisTestCase):

    COMMAND = "VAULT_TOKEN=s.Tok3nValue vault kv get -field=pw secret/redis-prod"
    HIDDEN = ("s.Tok3nValue", "field=pw", "secret/redis-prod", "kv get")

    def test_a_failing_password_command_names_its_program_only(self):
        r = self.run_rlock(["--password-command", self.COMMAND, "status", "k"])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("the password command (vault ...)", r.stderr)
        for hidden in self.HIDDEN:
            self.assertNotIn(hidden, r.stderr + r.stdout)

    def test_config_shows_commands_by_their_program(self):
        path = self.path("config.toml")
        with open(path, "w") as f:
            f.write('notify = "HOOK_KEY=abc123 curl -d @- https://hooks.example/xyz789"\n')
        os.chmod(path, 0o600)
        for fmt in ([], ["--json"]):
            r = self.run_rlock(["--config", path, "--password-command", self.COMMAND, "config",
                                *fmt])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("vault ...", r.stdout)
            self.assertIn("curl ...", r.stdout)
            for hidden in self.HIDDEN + ("abc123", "xyz789", "HOOK_KEY"):
                self.assertNotIn(hidden, r.stdout + r.stderr)

    def cmdline(self, pid):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()

    def test_a_password_in_a_url_leaves_rlocks_arguments_once_read(self):
        secret = "Cmd1ine-S3cret"
        self.server.cmd("ACL", "SETUSER", "argv-user", "on", ">" + secret, "~*", "&*", "+@all")
        url = f"redis://argv-user:{secret}@127.0.0.1:{self.server.port}"
        env = rlock_env(T=self.tmp)
        run = self.start(["-u", url, "run", "lock:argv", "--", "sh", "-c",
                          'touch "$T/started"; while [ ! -e "$T/go" ]; do sleep 0.05; done'],
                         env=env)
        wait_until(lambda: os.path.exists(self.path("started")), 10, "the run")
        seen = self.cmdline(run.pid)
        self.assertNotIn(secret.encode(), seen)
        # Three stars, whatever the password's length; the word's last bytes are NULs.
        self.assertIn(b"redis://argv-user:***@127.0.0.1", seen)
        self.assertRegex(seen, rb"argv-user:\*\*\*@127\.0\.0\.1:\d+" +
                         b"\0" * (len(secret) - 3 + 1) + b"run\0")
        self.assertIn(b"\0--\0sh\0-c\0", seen)  # the command's words are its own
        open(self.path("go"), "w").close()
        self.assertEqual(run.wait(timeout=10), 0)
        # The keeper of acquire --while-pid outlives its rlock: it must not show it either.
        sleeper = subprocess.Popen(["sleep", "30"])
        self.addCleanup(lambda: (sleeper.kill(), sleeper.wait()))
        r = self.run_rlock([f"--redis={url}", "acquire", "--while-pid", str(sleeper.pid),
                            "lock:kept"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        keepers = [pid for pid, cmd in processes_left().items() if " acquire " in cmd]
        self.assertEqual(len(keepers), 1)
        seen = self.cmdline(keepers[0])
        self.assertNotIn(secret.encode(), seen)
        self.assertIn(b"--redis=redis://argv-user:***@127.0.0.1", seen)
        sleeper.kill()
        sleeper.wait()
        wait_until(lambda: self.server.cmd("EXISTS", "lock:kept") == 0, 5, "the release")


if __name__ == "__main__":
    unittest.main()
