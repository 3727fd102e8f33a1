"""Edges that cannot hurt (docs/SECURITY.md): what rlock touches besides the lock, against real
redis-servers and, where a case needs one, a real second user of this host.

- Shell completion: key names are data in bash, zsh and fish; nothing in them runs.
- Files in directories another user can write: no planted link is followed, nothing outside
  the directory changes, the job still runs.
- A shared Redis: two keys never share a helper key; the documented ACLs.
"""
import json
import os
import pwd
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

from harness import documented_acl as harness_acl
from harness import least_privilege_section
from harness import (RLOCK, SOURCE_DIR, RedisClient, RedisServer, RedisTestCase, RespError,
                     rlock_env, run_rlock, start_rlock, stop_procs, wait_until)

BINDIR = os.path.dirname(os.path.abspath(RLOCK))
# Key names that a shell would run, split or glob, and ones it cannot take as they are.
HOSTILE = ["$(touch${IFS}%(canary)s)", "`touch %(canary)s`", "a b", "it's", 'say "hi"',
           "star*?", "back\\slash", "semi;colon", "brace{x}", "tilde~", "dollar$HOME"]
UNOFFERED = [b"new\nline", b"bidi\xe2\x80\xaex", b"bad\xff", b"esc\x1b[31m", b"c1\xc2\x85"]


def completion_script(shell):
    r = run_rlock(["completion", shell])
    assert r.returncode == 0, r.stderr
    f = tempfile.NamedTemporaryFile("w", prefix="rlock-completion-", suffix="." + shell,
                                    delete=False)
    with f:
        f.write(r.stdout)
    return f.name


# bash as readline drives it: the line cut into COMP_WORDS at ':' and '=' (COMP_WORDBREAKS)
# outside quotes, then the completion function; prints COMPREPLY, one a line.
BASH_DRIVER = r"""
source /usr/share/bash-completion/bash_completion
source "$1"
shift
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
COMP_WORDS=()
while (($#)); do
    w=$1
    while [[ $w != [\'\"]* && $w =~ ^([^:=]*)([:=]+)(.*)$ ]]; do
        [[ -n ${BASH_REMATCH[1]} ]] && COMP_WORDS+=("${BASH_REMATCH[1]}")
        COMP_WORDS+=("${BASH_REMATCH[2]}")
        w=${BASH_REMATCH[3]}
    done
    [[ -n $w || $# -eq 1 ]] && COMP_WORDS+=("$w")
    shift
done
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_rlock rlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""

# zsh: _rlock_keys as _rlock leaves it (the line before _arguments cut it, the word typed in
# PREFIX), with compadd replaced by one that prints what it was given.
ZSH_DRIVER = r"""
_arguments() { return 1 }
source "$1"
shift
compadd() { [[ $1 == -a ]] && print -rl -- "${(@P)2}" }
_rlock_line=("$@")
_rlock_current=$#
PREFIX=${@[-1]}
_rlock_keys ${=RLOCK_ZSH_ACTION_ARGS}
"""


class Completion(unittest.TestCase):
    """Key names from Redis completed in bash, zsh and fish: offered quoted for the line, never
    expanded or run; a name no line can carry is left out and the others are still offered;
    the prefix and the Redis the line names are honoured."""

    @classmethod
    def setUpClass(cls):
        cls.server = RedisServer()
        cls.other = RedisServer()
        cls.scripts = {shell: completion_script(shell) for shell in ("bash", "zsh", "fish")}

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.other.stop()
        for path in cls.scripts.values():
            os.unlink(path)

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rlock-completion-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.canary = os.path.join(self.dir, "PWNED")
        self.server.cmd("FLUSHALL")
        self.other.cmd("FLUSHALL")
        self.names = [n % {"canary": self.canary} for n in HOSTILE] + ["report"]
        for name in self.names:
            self.server.cmd("SET", "team:" + name, "held-by-java", "PX", 600000)
        for name in UNOFFERED:
            self.server.cmd("SET", b"team:" + name, "held-by-java", "PX", 600000)
        self.other.cmd("SET", "team:elsewhere", "held-by-java", "PX", 600000)
        self.env = dict(rlock_env(self.server), PATH=BINDIR + ":" + os.environ["PATH"])

    def tearDown(self):
        self.assertFalse(os.path.exists(self.canary), "completion ran a command in a key name")

    def bash(self, *words):
        r = subprocess.run(["bash", "-c", BASH_DRIVER, "driver", self.scripts["bash"], "rlock",
                            *words], capture_output=True, text=True, env=self.env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        # What readline would put on the line: the typed word up to its last ':', then the
        # reply; read back as bash would read it.
        typed = words[-1]
        kept = typed[:typed.rfind(":") + 1]
        return {shlex.split(kept + reply)[0] for reply in r.stdout.splitlines() if reply}

    def zsh(self, *words):
        """The keys the line WORDS gets, the action called as _arguments calls the command's
        (the words of its spec, then compadd's options)."""
        with open(self.scripts["zsh"]) as f:
            verb = next(w for w in words if re.fullmatch(r"[a-z]+", w))
            spec = re.search(rf"^_rlock_{verb}\(\) {{\n(.*?)^}}", f.read(), re.M | re.S)
        args = re.search(r"'[\d*]+:key:_rlock_keys([^']*)'", spec.group(1)).group(1).split()
        env = dict(self.env, RLOCK_ZSH_ACTION_ARGS=" ".join(args + ["-J", "-default-"]))
        r = subprocess.run(["zsh", "-f", "-c", ZSH_DRIVER, "driver", self.scripts["zsh"],
                            "rlock", *words], capture_output=True, text=True, env=env,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return set(filter(None, r.stdout.split("\n")))

    def fish(self, line):
        r = subprocess.run(["fish", "--no-config", "-c",
                            f"source {self.scripts['fish']}; complete -C {shlex.quote(line)}"],
                           capture_output=True, text=True, env=self.env, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {out.split("\t")[0] for out in r.stdout.split("\n") if out}

    def test_bash_offers_every_name_quoted_and_runs_none(self):
        self.assertEqual(self.bash("status", "team:"), {"team:" + n for n in self.names})
        self.assertEqual(self.bash("status", "team:a"), {"team:a b"})
        self.assertEqual(self.bash("run", "-w", "5s", "team:st"), {"team:star*?"})
        self.assertEqual(self.bash("status", "team:$"), {"team:" + self.names[0]})
        self.assertEqual(self.bash("status", "team:dollar\\$"), {"team:dollar$HOME"})

    def test_bash_strips_the_prefix_and_asks_the_redis_on_the_line(self):
        self.assertEqual(self.bash("--prefix", "team:", "status", "re"), {"report"})
        self.assertEqual(self.bash("status", "--prefix=team:", "a"), {"a b"})
        self.assertEqual(self.bash("-u", self.other.url, "status", "team:"), {"team:elsewhere"})
        self.assertEqual(self.bash("status", "--redis=" + self.other.url, "--prefix", "team:",
                                   ""), {"elsewhere"})
        # After an opening quote readline inserts the name as it is.
        r = subprocess.run(["bash", "-c", BASH_DRIVER, "driver", self.scripts["bash"], "rlock",
                            "--prefix", "team:", "status", "'a"], capture_output=True,
                           text=True, env=self.env)
        self.assertEqual(r.stdout, "a b\n")

    def test_zsh_offers_every_name_as_it_is(self):
        self.assertEqual(self.zsh("status", "team:"), {"team:" + n for n in self.names})
        self.assertEqual(self.zsh("--prefix", "team:", "status", "a"), {"a b"})
        self.assertEqual(self.zsh("status", "-u", self.other.url, "team:"), {"team:elsewhere"})
        self.assertEqual(self.zsh("status", "team:a\\ "), {"team:a b"})

    def test_fish_offers_every_name_and_runs_none(self):
        self.assertEqual(self.fish("rlock status team:"), {"team:" + n for n in self.names})
        self.assertEqual(self.fish("rlock --prefix team: status a"), {"a b"})
        self.assertEqual(self.fish(f"rlock -u {self.other.url} status team:"), {"team:elsewhere"})
        self.assertEqual(self.fish("rlock status 'team:a "), {"team:a b"})

    def test_a_free_key_with_a_history_is_offered_where_one_is_wanted(self):
        # history, logs, check, resume, pause ... name keys that are free as often as not;
        # status, stop, release and extend act on a holder: held keys only.
        r = run_rlock(["run", "team:free", "--", "true"], env=self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        for verb in ("history", "logs", "check", "resume", "pause", "inspect"):
            self.assertEqual(self.bash(verb, "team:fr"), {"team:free"}, verb)
        self.assertEqual(self.zsh("history", "team:fr"), {"team:free"})
        self.assertEqual(self.fish("rlock history team:fr"), {"team:free"})
        for verb in ("status", "stop", "release"):
            self.assertEqual(self.bash(verb, "team:fr"), set(), verb)
        self.assertEqual(self.fish("rlock status team:fr"), set())

    def test_a_redis_that_does_not_answer_gives_nothing_at_once(self):
        env = self.env
        self.env = dict(env, RLOCK_REDIS_URL="redis://10.255.255.1:6379")
        self.assertEqual(self.bash("status", "team:"), set())
        self.assertEqual(self.fish("rlock status team:"), set())

    def test_tab_runs_no_password_command(self):
        marker = os.path.join(self.dir, "asked")
        self.assertEqual(self.bash("--password-command", f"touch {marker}", "status",
                                   "team:re"), {"team:report"})
        self.assertFalse(os.path.exists(marker), "TAB ran --password-command")


INTRUDER = "rlock-intruder"


class PlantedFiles(RedisTestCase):
    """Files rlock writes in a directory another user can write: that user (a real one,
    made for the test) plants links and files of their own; rlock, as root, follows none,
    changes nothing outside the directory, says why in one line, and the job still runs."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root, to make a second user")
        subprocess.run(["userdel", INTRUDER], capture_output=True)
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/false", INTRUDER],
                       check=True)
        cls.intruder = pwd.getpwnam(INTRUDER).pw_uid

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["userdel", INTRUDER], capture_output=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        os.chmod(self.tmp, 0o755)
        # What the intruder aims at: a file of root's, and a name in a directory only root
        # can write.
        secret = os.path.join(self.tmp, "secret")
        os.mkdir(secret, 0o700)
        self.victim = os.path.join(secret, "victim")
        with open(self.victim, "w") as f:
            f.write("root's own\n")
        self.absent = os.path.join(secret, "made-by-rlock")
        self.shared = self.shared_dir("shared", 0o1777)  # /var/tmp's mode

    def tearDown(self):
        with open(self.victim) as f:
            self.assertEqual(f.read(), "root's own\n", "a file outside the directory changed")
        self.assertFalse(os.path.exists(self.absent), "rlock made a file where a link pointed")
        super().tearDown()

    def shared_dir(self, name, mode):
        path = os.path.join(self.tmp, name)
        os.mkdir(path)
        os.chmod(path, mode)
        return path

    def as_intruder(self, *argv):
        subprocess.run(argv, user=INTRUDER, check=True)

    def run_job(self, *options):
        marker = self.path("ran")
        r = self.run_rlock(["run", *options, "k", "--", "touch", marker])
        return r, os.path.exists(marker)

    def assert_refused(self, r, ran, *words):
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(ran, "the job did not run")
        lines = [line for line in r.stderr.splitlines() if "metrics" in line]
        self.assertEqual(len(lines), 1, r.stderr)
        for word in words:
            self.assertIn(word, lines[0])

    def test_the_metrics_file_is_written_where_only_root_can_write(self):
        private = self.shared_dir("private", 0o755)
        metrics = os.path.join(private, "m.prom")
        r, ran = self.run_job("--metrics-file", metrics)
        self.assertEqual((r.returncode, ran, r.stderr), (0, True, ""))
        with open(metrics) as f:
            self.assertIn("rlock_runs_total", f.read())
        self.assertEqual(sorted(os.listdir(private)), ["m.prom", "m.prom.lock"])

    def test_links_planted_for_the_metrics_file_are_not_followed(self):
        metrics = os.path.join(self.shared, "m.prom")
        # The temporary file's old name: rlock writes a fresh name of its own now.
        self.as_intruder("ln", "-s", self.victim, metrics + ".tmp")
        r, ran = self.run_job("--metrics-file", metrics)
        self.assertEqual((r.returncode, ran, r.stderr), (0, True, ""))
        self.assertEqual(os.stat(metrics).st_uid, 0)
        self.assertTrue(os.path.islink(metrics + ".tmp"))
        for planted, target in ((".lock", self.absent), ("", self.victim)):
            os.unlink(metrics + planted)
            self.as_intruder("ln", "-s", target, metrics + planted)
            r, ran = self.run_job("--metrics-file", metrics)
            self.assert_refused(r, ran, metrics + planted, "link")
            os.unlink(self.path("ran"))

    def test_files_another_user_owns_are_refused(self):
        metrics = os.path.join(self.shared, "m.prom")
        self.as_intruder("sh", "-c", f"echo 'rlock_runs_total 1e9' > {metrics}")
        r, ran = self.run_job("--metrics-file", metrics)
        self.assert_refused(r, ran, metrics, INTRUDER)

    def test_a_directory_others_may_write_without_the_sticky_bit_is_refused(self):
        open_dir = self.shared_dir("open", 0o777)
        r, ran = self.run_job("--metrics-file", os.path.join(open_dir, "m.prom"))
        self.assert_refused(r, ran, open_dir, "sticky")
        self.assertEqual(os.listdir(open_dir), [])
        theirs = self.shared_dir("theirs", 0o755)
        os.chown(theirs, self.intruder, -1)
        r, ran = self.run_job("--metrics-file", os.path.join(theirs, "m.prom"))
        self.assert_refused(r, ran, theirs, INTRUDER)
        # A link on the way that the intruder owns, to a directory root trusts.
        self.as_intruder("ln", "-s", os.path.dirname(self.victim),
                         os.path.join(self.shared, "dir"))
        r, ran = self.run_job("--metrics-file", os.path.join(self.shared, "dir", "m.prom"))
        self.assert_refused(r, ran, "link", INTRUDER)

    def test_a_heartbeat_file_another_user_could_touch_is_refused(self):
        beat = os.path.join(self.shared, "beat")
        self.as_intruder("touch", beat)
        for planted in ("theirs", "link", "anyone's"):
            r, ran = self.run_job("--heartbeat-file", beat, "--stale-after", "2s")
            self.assertEqual(r.returncode, 64, r.stderr)
            self.assertFalse(ran)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            self.assertIn("--heartbeat-file", r.stderr)
            self.assertEqual(self.server.cmd("KEYS", "*"), [], "a refused run touched Redis")
            os.unlink(beat)
            if planted == "theirs":
                self.as_intruder("ln", "-s", self.absent, beat)
            elif planted == "link":
                with open(beat, "w"):
                    os.chmod(beat, 0o666)
        # A file its group may write, and a second name of a file of root's.
        private = self.shared_dir("private", 0o755)
        for planted in ("group", "hard link"):
            beat = os.path.join(private, "beat")
            with open(beat, "w"):
                pass
            if planted == "group":
                os.chmod(beat, 0o664)
            else:
                os.link(beat, os.path.join(self.tmp, "secret", "second-name"))
            r, ran = self.run_job("--heartbeat-file", beat, "--stale-after", "2s")
            self.assertEqual((r.returncode, ran), (64, False), r.stderr)
            self.assertIn("mode 0664" if planted == "group" else "2 names (hard links)",
                          r.stderr)
            os.unlink(beat)
        # The job's own file, where only root can write, is used.
        mine = os.path.join(self.shared_dir("mine", 0o700), "beat")
        r, ran = self.run_job("--heartbeat-file", mine, "--stale-after", "2s")
        self.assertEqual((r.returncode, ran), (0, True), r.stderr)

    def test_a_config_file_others_can_change_is_refused_whatever_it_sets(self):
        open_dir = self.shared_dir("open", 0o777)
        config = os.path.join(open_dir, "rlock.toml")
        with open(config, "w") as f:
            f.write(f'metrics-file = "{self.absent}"\n')
        r, ran = self.run_job("--config", config)
        self.assertEqual((r.returncode, ran), (78, False), r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn(config, r.stderr)
        self.assertIn("without the sticky bit", r.stderr)
        self.assertEqual(self.server.cmd("KEYS", "*"), [])


def readme_acl_line(user):
    """The docs/REDIS.md "Least privilege" line that makes USER, split into its rules (no
    password)."""
    section = least_privilege_section()
    lines = [line for line in section.splitlines() if line.startswith(f"ACL SETUSER {user} ")]
    assert len(lines) == 1, f'docs/REDIS.md "Least privilege" has no single ACL SETUSER {user} line'
    return [r for r in lines[0].split()[3:] if not r.startswith(">")]


class SharedRedis(RedisTestCase):
    """A Redis other users share: the documented ACLs, and keys that must stay apart."""

    def client_as(self, user, rules):
        self.server.cmd("ACL", "SETUSER", user, "reset", ">pw-" + user, *rules)
        self.addCleanup(lambda: self.server.cmd("ACL", "DELUSER", user))
        c = RedisClient(self.server.port)
        c("AUTH", user, "pw-" + user)
        self.addCleanup(c.close)
        return c

    def test_the_jobs_acl_reads_no_server_secret(self):
        job = self.client_as("job", sum(harness_acl(), []))
        for command in (["CONFIG", "GET", "requirepass"], ["CONFIG", "GET", "*"],
                        ["SCRIPT", "FLUSH"], ["FUNCTION", "FLUSH"], ["FLUSHALL"],
                        ["ACL", "LIST"], ["SCRIPT", "KILL"]):
            with self.assertRaises(RespError, msg=command) as denied:
                job(*command)
            self.assertIn("NOPERM", str(denied.exception), command)

    def test_the_on_call_acl_reads_locks_and_history_but_no_kept_output(self):
        secret = "customer-4711-iban"
        r = self.run_rlock(["run", "--keep-output", "64k", "lock:job", "--", "echo", secret])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(secret, r.stdout)
        holder = self.start(["run", "lock:held", "--", "sleep", "30"])
        wait_until(lambda: self.server.cmd("EXISTS", "lock:held") == 1, 10, "lock:held taken")
        # Another tenant's lock, outside the on-call user's key patterns: SCAN still names its
        # fence counter, and list passes over what the ACL denies.
        other = self.run_rlock(["run", "other:x", "--", "true"])
        self.assertEqual(other.returncode, 0, other.stderr)
        self.server.cmd("SET", "other:x", "rlock/1 t host=h pid=1 fence=1", "PX", "600000")
        oncall = self.client_as("oncall", readme_acl_line("oncall"))
        url = f"redis://oncall:pw-oncall@127.0.0.1:{self.server.port}"
        env = rlock_env(RLOCK_REDIS_URL=url)
        for args, status in ((["status", "lock:held"], 0), (["inspect", "lock:job"], 1),
                             (["list"], 0), (["history", "lock:job"], 0),
                             (["check", "lock:job", "--every", "1h"], 0)):
            r = run_rlock(args, env=env)
            self.assertEqual(r.returncode, status, (args, r.stderr))
            self.assertNotIn(secret, r.stdout + r.stderr)
        listed = run_rlock(["list"], env=env)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn("lock:held", listed.stdout)
        self.assertNotIn("other:x", listed.stdout)
        completed = run_rlock(["list", "--complete", ""], env=env)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        self.assertIn("lock:held", completed.stdout)
        # A verb that names the key still fails, naming the command and the key.
        denied = run_rlock(["status", "other:x"], env=env)
        self.assertEqual(denied.returncode, 69)
        self.assertIn("do not allow other:x, which rlock reads with TYPE", denied.stderr)
        watch = start_rlock(["watch", "lock:held"], env=env)
        self.addCleanup(stop_procs, [watch])
        holder.terminate()
        holder.wait(timeout=10)
        out = wait_until(lambda: (watch.stdout.readline() or None), 10, "watch's first line")
        self.assertIn("lock:held", out)
        r = run_rlock(["logs", "lock:job"], env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertNotIn(secret, r.stdout + r.stderr)
        kept = self.server.cmd("KEYS", "rlock-output:*")
        self.assertTrue(kept, "no kept output in Redis")
        for key in kept:
            for command in (["XRANGE", key, "-", "+"], ["XREVRANGE", key, "+", "-"],
                            ["XREAD", "STREAMS", key, "0"], ["XINFO", "STREAM", key, "FULL"],
                            ["DUMP", key], ["ZRANGE", key, "0", "-1"], ["TYPE", key]):
                with self.assertRaises(RespError, msg=command):
                    oncall(*command)
        # The job's own output is still the job's user's to read.
        r = self.run_rlock(["logs", "lock:job"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(secret, r.stdout)

    def test_a_key_under_a_prefix_cannot_name_another_locks_helper(self):
        self.assertEqual(self.run_rlock(["run", "team", "--", "true"]).returncode, 0)
        fence = self.server.cmd("GET", "{team}:rlock:fence")
        for prefix, key in (("{team}:rlock:", "fence"), ("team}:rlock{}:", "fence")):
            r = self.run_rlock(["--prefix", prefix, "run", key, "--", "true"])
            self.assertEqual(r.returncode, 64, r.stderr)
            self.assertIn("helper keys", r.stderr)
        self.assertEqual(self.server.cmd("GET", "{team}:rlock:fence"), fence)

    def test_a_key_and_the_key_that_is_its_own_hash_tag_are_two_locks(self):
        a, b = "col:a", "{col:a}"
        # A pause of one does not hold the other.
        self.assertEqual(self.run_rlock(["pause", b, "--for", "1h", "--reason", "maintenance"]).returncode, 0)
        r = self.run_rlock(["run", a, "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.run_rlock(["run", b, "--", "true"]).returncode, 75)
        self.assertEqual(self.run_rlock(["resume", b]).returncode, 0)
        # Output, history and fences of their own.
        for key, word in ((a, "from-a"), (b, "from-b"), (a, "again-a")):
            r = self.run_rlock(["run", "--keep-output", "64k", key, "--", "echo", word])
            self.assertEqual(r.returncode, 0, r.stderr)
        logs_b = self.run_rlock(["logs", b])
        self.assertEqual(logs_b.stdout, "from-b\n", logs_b.stderr)
        self.assertEqual(self.run_rlock(["logs", a]).stdout, "again-a\n")
        history = {k: json.loads(self.run_rlock(["history", "--json", k]).stdout)
                   for k in (a, b)}
        # b's pause and resume are in b's history (operator actions), none in a's.
        actions = {k: sorted(e["end"] for e in history[k]["runs"] if e["end"] in ("pause", "resume"))
                   for k in (a, b)}
        self.assertEqual(actions, {a: [], b: ["pause", "resume"]})
        runs = {k: [e for e in history[k]["runs"] if e["end"] not in ("pause", "resume")]
                for k in (a, b)}
        self.assertEqual(len(runs[b]), 1, history[b])
        self.assertEqual(len(runs[a]), 3, history[a])
        # Each key's counter holds its own last fence.
        for key, counter in ((a, "{col:a}:rlock:fence"), (b, "{col:a}:rlock{}:fence")):
            self.assertEqual(int(self.server.cmd("GET", counter)),
                             max(int(run["fence"]) for run in runs[key]), key)
        # A --fair waiter on one does not delay the other.
        holder = self.start(["run", b, "--", "sleep", "30"])
        wait_until(lambda: self.server.cmd("EXISTS", b) == 1, 10, f"{b} taken")
        waiter = self.start(["run", "--fair", "-w", "30s", b, "--", "true"])
        wait_until(lambda: any(k.endswith(":queue") for k in self.server.cmd("KEYS", "*")),
                   10, "the waiter queued")
        r = self.run_rlock(["run", "--fair", a, "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        holder.terminate()
        self.assertEqual(waiter.wait(timeout=20), 0)
        holder.wait(timeout=10)
        helpers = sorted(self.server.cmd("KEYS", "*col:a*"))
        self.assertIn("{col:a}:rlock:fence", helpers)
        self.assertIn("{col:a}:rlock{}:fence", helpers)


if __name__ == "__main__":
    unittest.main()
