"""Edges that cannot hurt (docs/SECURITY.md): what rlock touches besides the lock, against real
redis-servers and, where a case needs one, a real second user of this host.

- Shell completion: key names are data in bash, zsh and fish; nothing in them runs.
- Files in directories another user can write: no planted link is followed, nothing outside
  the directory changes, the job still runs.
- A shared Redis: two keys never share a helper key; the documented ACLs.
"""
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
import unittest

from harness import RLOCK, RedisServer, rlock_env, run_rlock, wait_until

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
_rlock_keys
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
        r = subprocess.run(["zsh", "-f", "-c", ZSH_DRIVER, "driver", self.scripts["zsh"],
                            "rlock", *words], capture_output=True, text=True, env=self.env,
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
        self.assertEqual(self.bash("status", "team:$"), {"team:" + self.names[0],
                                                         "team:dollar$HOME"})

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


if __name__ == "__main__":
    unittest.main()
