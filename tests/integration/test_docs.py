"""Docs move with the code: every flag --help shows is in the man page, the completions and the
README; the exit-status table is the same in the header, the man page and the README."""
import os
import re
import shutil
import subprocess
import unittest

from harness import run_rlock

SOURCE = os.environ.get("RLOCK_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
VERBS = ["run", "status", "inspect", "list", "acquire", "extend", "release", "config"]


def read(rel):
    with open(os.path.join(SOURCE, rel)) as f:
        return f.read()


def long_options(help_text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", help_text))


class Docs(unittest.TestCase):
    def test_every_long_option_is_documented_and_completed(self):
        man = read("man/rlock.1").replace("\\-", "-")
        docs = {"man/rlock.1": man, "README.md": read("README.md"),
                "completions/rlock.bash": read("completions/rlock.bash"),
                "completions/_rlock": read("completions/_rlock"),
                "completions/rlock.fish": read("completions/rlock.fish").replace("-l ", "--")}
        for verb in VERBS:
            r = run_rlock([verb, "--help"])
            self.assertEqual(r.returncode, 0)
            options = long_options(r.stdout.split("Forms:")[0]) - {"--help"}
            self.assertGreater(len(options), 10)
            for name, text in docs.items():
                missing = sorted(o for o in options if o not in text)
                self.assertEqual(missing, [], f"options of 'rlock {verb}' missing from {name}")

    def test_exit_status_tables_agree(self):
        header = {int(v) for v in re.findall(r"k_exit_\w+ = (\d+)", read("src/exit_status.h"))} - {0}
        man = read("man/rlock.1")
        table = man.split(".SH EXIT STATUS")[1].split(".TE")[0]
        man_codes = {int(m) for m in re.findall(r"^(\d+)\t", table, re.M)}
        readme = read("README.md").split("## Exit status")[1].split("\n## ")[0]
        readme_codes = {int(m) for m in re.findall(r"^\| (\d+) \|", readme, re.M)}
        self.assertEqual(man_codes, header)
        self.assertEqual(readme_codes, header)

    def test_readme_layout_names_every_source_file(self):
        layout = read("README.md").split("## Layout")[1].split("\n## ")[0]
        first_cells = [line.split("|")[1] for line in layout.splitlines() if line.startswith("| `")]
        named = {n for cell in first_cells for n in re.findall(r"`([\w/.]+)`", cell)}
        tree = {f for f in os.listdir(os.path.join(SOURCE, "src"))
                if f.endswith((".cpp", ".h"))} | {"verbs/", "lua/"}
        self.assertEqual(sorted(tree - named), [], "in src/ but not in README's Layout")
        self.assertEqual(sorted(named - tree), [], "in README's Layout but not in src/")

    def test_man_renders_without_warnings(self):
        man = shutil.which("man")
        self.assertIsNotNone(man, "man is needed (man-db)")
        r = subprocess.run([man, "--warnings", "-l", os.path.join(SOURCE, "man/rlock.1")],
                           capture_output=True, text=True, env=dict(os.environ, MANWIDTH="80"))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertIn("EXIT STATUS", r.stdout)

    def test_man_page_is_lint_clean(self):
        mandoc = shutil.which("mandoc")
        self.assertIsNotNone(mandoc, "mandoc is needed (packaging/setup-debian.sh installs it)")
        r = subprocess.run([mandoc, "-Tlint", os.path.join(SOURCE, "man/rlock.1")],
                           capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""))


BASH_DRIVER = r"""
source /usr/share/bash-completion/bash_completion
source "$1"
shift
COMP_WORDS=("$@")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
_rlock rlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"""


class BashCompletion(unittest.TestCase):
    def complete(self, *words):
        return self.complete_env(dict(os.environ), *words)

    def test_verbs_flags_and_values(self):
        self.assertEqual(self.complete("rlock", "ru"), {"run"})
        self.assertEqual(self.complete("rlock", "c"), {"config"})
        self.assertEqual(self.complete("rlock", "re"), {"release"})
        self.assertIn("--force", self.complete("rlock", "release", "k", "--f"))
        self.assertIn("--cacert", self.complete("rlock", "config", "--ca"))
        self.assertIn("--on-lost", self.complete("rlock", "run", "--on"))
        self.assertIn("--min-hold", self.complete("rlock", "run", "--m"))
        self.assertEqual(self.complete("rlock", "run", "--on-lost", ""), {"kill", "ignore"})
        self.assertIn("TERM", self.complete("rlock", "run", "--kill-signal", ""))
        # After "--", the command's own completion: commands from $PATH.
        self.assertIn("true", self.complete("rlock", "run", "k", "--", "tru"))

    def test_lock_keys_come_from_rlock_list_and_nothing_when_redis_is_down(self):
        from harness import RedisServer, RLOCK, free_port
        server = RedisServer()
        self.addCleanup(server.stop)
        server.cmd("SET", "lock:report", "held-by-java", "PX", 60000)
        server.cmd("SET", "lock:cleanup", "held-by-java", "PX", 60000)
        bindir = os.path.dirname(os.path.abspath(RLOCK))
        env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"],
                   RLOCK_REDIS_URL=server.url)
        self.assertEqual(self.complete_env(env, "rlock", "status", "lock:r"), {"lock:report"})
        env["RLOCK_REDIS_URL"] = f"redis://127.0.0.1:{free_port()}"
        self.assertEqual(self.complete_env(env, "rlock", "status", "lock:r"), set())

    def complete_env(self, env, *words):
        self.assertTrue(os.path.exists("/usr/share/bash-completion/bash_completion"),
                        "bash-completion is needed (packaging/setup-debian.sh installs it)")
        r = subprocess.run(["bash", "-c", BASH_DRIVER, "driver",
                            os.path.join(SOURCE, "completions/rlock.bash"), *words],
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return set(r.stdout.split())


class ZshAndFish(unittest.TestCase):
    def test_zsh_completion_parses(self):
        zsh = shutil.which("zsh")
        self.assertIsNotNone(zsh, "zsh is needed (packaging/setup-debian.sh installs it)")
        r = subprocess.run([zsh, "-n", os.path.join(SOURCE, "completions/_rlock")],
                           capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_fish_completion_completes(self):
        fish = shutil.which("fish")
        self.assertIsNotNone(fish, "fish is needed (packaging/setup-debian.sh installs it)")
        path = os.path.join(SOURCE, "completions/rlock.fish")
        r = subprocess.run([fish, "-n", path], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        r = subprocess.run([fish, "--no-config", "-c",
                            f"source {path}; complete -C 'rlock run --on-lost '"],
                           capture_output=True, text=True)
        self.assertEqual({line.split("\t")[0] for line in r.stdout.splitlines()}, {"kill", "ignore"})


if __name__ == "__main__":
    unittest.main()
