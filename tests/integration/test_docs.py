"""Docs move with the code: every flag --help shows is in the man pages, the completions and the
README, and every flag they document is one rlock takes; each command's help and its man page
name the same exit statuses, which are the ones it really returns; every rlock command line of
the README and of the man pages' EXAMPLES parses and runs (against a private Redis); cron lines
use absolute paths. The man pages are laid out as git's and podman's: rlock(1) an overview to
read through, a page for each command, rlock-COMMAND(1), rlock.toml(5) and rlock-redis(7)."""
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import unittest

from harness import RedisServer, free_port, rlock_env, run_rlock, start_rlock, wait_until

SOURCE = os.environ.get("RLOCK_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
VERBS = ["run", "status", "inspect", "history", "logs", "check", "watch", "list", "acquire", "extend",
         "release", "stop", "pause", "resume", "reset-period", "doctor", "config", "completion",
         "help"]
# The commands that take options beyond --help.
WITH_OPTIONS = VERBS[:-2]
# The commands in the order rlock --help lists them: acquire's token before extend's --token.
HELP_ORDER = ["run", "status", "inspect", "list", "history", "logs", "watch", "check", "stop",
              "pause", "resume", "reset-period", "acquire", "extend", "release", "doctor",
              "config", "completion"]
SHELLS = {"bash": "rlock.bash", "zsh": "rlock.zsh", "fish": "rlock.fish"}


def read(rel):
    with open(os.path.join(SOURCE, rel)) as f:
        return f.read()


def completion(shell):
    """What `rlock completion SHELL` prints."""
    r = run_rlock(["completion", shell])
    assert r.returncode == 0, r.stderr
    return r.stdout


def completion_file(shell):
    """`rlock completion SHELL` in a file of its own, for the shell to source."""
    f = tempfile.NamedTemporaryFile("w", prefix="rlock-completion-", suffix="." + shell,
                                    delete=False)
    with f:
        f.write(completion(shell))
    return f.name


def man_pages():
    """The man pages, as man/ names them: rlock(1) first, then each command's in the order
    rlock --help lists them, then the config file's and Redis's."""
    return (["rlock.1"] + [f"rlock-{verb}.1" for verb in HELP_ORDER] +
            ["rlock.toml.5", "rlock-redis.7"])


def man_text(page=None):
    """The source of one man page, or of them all, with roff's escaped hyphens made plain and
    its font changes (\\fB ... \\fR) left out, as a reader sees the words."""
    pages = [page] if page else man_pages()
    text = "".join(read(f"man/{p}") for p in pages)
    return re.sub(r"\\f[BIRP]", "", text).replace("\\-", "-")


def man_section(text, name):
    """The text of the .SH NAME section of a page's source, or None."""
    parts = re.split(rf"^\.SH {re.escape(name)}\n", text, flags=re.M)
    return parts[1].split("\n.SH ")[0] if len(parts) > 1 else None


def long_options(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*[a-z])", text))


def short_options(help_text):
    """The one-letter options of a --help text ("-q,--quiet" gives -q)."""
    return set(re.findall(r"^\s+(-[a-zA-Z]), --", help_text, re.M))


def exit_codes(sentence):
    """The statuses an "Exit status: ..." sentence names: 64, 69 ... but not 128 of 128+N."""
    return {int(n) for n in re.findall(r"(?<![\w+/.-])(\d{1,3})(?![\w+.])", sentence)}


def help_of(verb):
    r = run_rlock([verb, "--help"])
    assert r.returncode == 0, r.stderr
    return r.stdout


def footer_codes(verb):
    text = help_of(verb)
    return exit_codes(text.split("Exit status:")[1])


def exit_sentence(text):
    """The statuses of the "Exit status: ..." sentence in TEXT (it ends at a request line)."""
    return exit_codes(text.split("Exit status:")[1].split("\n.")[0])


def man_command_codes():
    """For each command, the statuses its man page names: the "Exit status: ..." sentence of
    rlock-COMMAND(1)'s EXIT STATUS, or, for help, which has no page, that of its entry in
    rlock(1)'s COMMANDS."""
    out = {}
    for verb in HELP_ORDER:
        section = man_section(man_text(f"rlock-{verb}.1"), "EXIT STATUS")
        assert section and "Exit status:" in section, f"rlock-{verb}(1) names no exit status"
        out[verb] = exit_sentence(section)
    commands = man_section(man_text("rlock.1"), "COMMANDS")
    for entry in commands.split(".TP\n")[1:]:
        if "Exit status:" in entry:
            tag = entry.split("\n")[0].split()[1].strip('"')
            assert tag not in out, f"{tag}: an exit status in rlock(1) and in its own page"
            out[tag] = exit_sentence(entry)
    return out


class Docs(unittest.TestCase):
    def test_every_option_is_documented_and_completed(self):
        man = man_text()
        docs = {"the man pages": man,
                "rlock completion bash": completion("bash"),
                "rlock completion zsh": completion("zsh"),
                "rlock completion fish": completion("fish").replace("-l ", "--")}
        for verb in WITH_OPTIONS:
            text = help_of(verb)
            options = long_options(text) - {"--help"}
            self.assertGreater(len(options), 3, verb)
            for name, doc in docs.items():
                missing = sorted(o for o in options if o not in doc)
                self.assertEqual(missing, [], f"options of 'rlock {verb}' missing from {name}")
            self.assertIn(verb, man.split(".SH DESCRIPTION")[0])
            for short in short_options(text) - {"-h"}:
                self.assertRegex(man, rf"\.B[IR]? {re.escape(short)} \", \"", f"{short} in man")

    def test_every_documented_option_exists(self):
        taken = set()
        for verb in WITH_OPTIONS:
            taken |= long_options(help_of(verb))
        man_options = set()
        for page in man_pages():
            options = man_section(man_text(page), "OPTIONS") or ""
            for tag in re.findall(r"^\.T[PQ]\n(.*)$", options, re.M):
                man_options |= long_options(tag)
        readme = read("README.md") + read("docs/REDIS.md")
        readme_options = set()
        for line in readme.splitlines():
            if line.startswith("| `-"):
                readme_options |= long_options(line.split("|")[1])
        readme_options |= long_options(" ".join(
            code for code in re.findall(r"`([^`]*)`", readme) if code.startswith(("-", "rlock "))))
        self.assertGreater(len(man_options), 30)
        self.assertEqual(sorted(man_options - taken - {"--help"}), [],
                         "in a man page's OPTIONS, not in --help")
        self.assertEqual(sorted(readme_options - taken - {"--version", "--help"}), [],
                         "in the README or docs/REDIS.md, not in any --help")

    def test_each_command_names_its_own_exit_statuses(self):
        man = man_command_codes()
        table = {int(v) for v in re.findall(r"k_exit_\w+ = (\d+)", read("src/util/exit_status.h"))}
        named = set()
        for verb in VERBS:
            footer = footer_codes(verb)
            self.assertTrue(footer, f"'rlock {verb} --help' names no exit status")
            self.assertEqual(footer, man.get(verb), f"exit statuses of {verb}: --help vs man page")
            self.assertLessEqual(footer, table, verb)
            named |= footer
        self.assertEqual(table - named - {0}, set(), "statuses no command names")
        # Only run returns what its command returned.
        for verb in VERBS[1:]:
            self.assertNotIn(124, footer_codes(verb), verb)

    def test_the_statuses_named_are_the_ones_returned(self):
        # Each command against an unreachable Redis, or given bad input: the status it returns
        # is among those its help names.
        down = rlock_env(RLOCK_REDIS_URL=f"redis://127.0.0.1:{free_port()}")
        token = "0" * 32
        cases = {"run": ["k", "--", "true"], "status": ["k"], "inspect": ["k"], "watch": ["k"],
                 "history": ["k"], "list": [], "acquire": ["k"], "extend": ["k", "--token", token],
                 "release": ["k", "--token", token], "reset-period": ["k", "--once-per", "day"],
                 "check": ["k", "--every", "1d"]}
        for verb, args in cases.items():
            codes = footer_codes(verb)
            self.assertEqual(run_rlock([verb] + args, env=down).returncode, 69, verb)
            self.assertIn(69, codes, verb)
            self.assertEqual(run_rlock([verb, "--no-such-flag"] + args, env=down).returncode, 64)
            self.assertIn(64, codes, verb)
        self.assertEqual(run_rlock(["help", "nosuch"]).returncode, 64)
        self.assertEqual(run_rlock(["config", "--ttl", "1x"]).returncode, 64)
        # Against a real Redis: a free lock, a busy one, a token that is not ours, a period
        # with no run.
        server = RedisServer()
        self.addCleanup(server.stop)
        up = rlock_env(server)
        server.cmd("SET", "held", "someone-else", "PX", 60000)
        for verb, args, status in [
                ("status", ["free"], 1), ("inspect", ["free"], 1), ("status", ["held"], 0),
                ("run", ["held", "--", "true"], 75), ("acquire", ["held"], 75),
                ("extend", ["held", "--token", token], 1), ("release", ["held", "--token", token], 1),
                ("release", ["free", "--force"], 1), ("reset-period", ["k", "--once-per", "day"], 1),
                ("history", ["k"], 0), ("check", ["k", "--every", "1d"], 1),
                ("list", [], 0), ("config", [], 0), ("help", ["run"], 0)]:
            self.assertEqual(run_rlock([verb] + args, env=up).returncode, status, (verb, args))
            self.assertIn(status, footer_codes(verb), verb)
        self.assertEqual(run_rlock(["run", "k", "--", "true"], env=up).returncode, 0)
        self.assertEqual(run_rlock(["check", "k", "--every", "1d"], env=up).returncode, 0)
        self.assertIn(0, footer_codes("check"))

    def test_exit_status_tables_agree(self):
        header = {int(v) for v in re.findall(r"k_exit_\w+ = (\d+)", read("src/util/exit_status.h"))}
        man = read("man/rlock.1")
        table = man.split(".SH EXIT STATUS")[1].split(".TE")[0]
        man_codes = {int(m) for m in re.findall(r"^(\d+)\t", table, re.M)}
        readme = read("README.md").split("## Exit status")[1].split("\n## ")[0]
        readme_codes = {int(m) for m in re.findall(r"^\| (\d+) \|", readme, re.M)}
        self.assertEqual(man_codes, header)
        self.assertEqual(readme_codes, header)
        # Verb by verb: each command whose --help names 1 or 75 is named in that row of both
        # tables (what 1 means differs by command).
        man_rows = dict(re.findall(r"^(\d+)\tT\{\n(.*?)\nT\}", table, re.M | re.S))
        readme_rows = dict(re.findall(r"^\| (\d+) \| (.*) \|$", readme, re.M))
        for code in ("1", "75"):
            for verb in VERBS:
                if int(code) not in footer_codes(verb):
                    continue
                for name, row in (("man", man_rows[code].replace("\\-", "-")),
                                  ("README", readme_rows[code])):
                    self.assertRegex(row, rf"(?<![\w-]){re.escape(verb)}(?![\w-])",
                                     f"{verb} returns {code}: not in the {name} table's row")
        # EXIT STATUS follows OPTIONS, as in util-linux's pages: in rlock(1) and in each page
        # of a command that takes options.
        for page in man_pages():
            sections = re.findall(r"^\.SH (.+)$", read(f"man/{page}"), re.M)
            if "OPTIONS" in sections:
                self.assertEqual(sections[sections.index("OPTIONS") + 1], "EXIT STATUS", page)
        self.assertIn("OPTIONS", re.findall(r"^\.SH (.+)$", man, re.M))

    def test_every_command_has_its_page(self):
        # As git's and podman's pages: rlock(1) is the overview, each command of rlock --help
        # has rlock-COMMAND(1), and rlock(1)'s COMMANDS and SEE ALSO name every page.
        listed = re.findall(r"^  ([a-z-]+)  ", run_rlock(["--help"]).stdout, re.M)
        self.assertEqual(listed, HELP_ORDER + ["help"])
        pages = sorted(os.listdir(os.path.join(SOURCE, "man")))
        self.assertEqual(pages, sorted(man_pages() + ["CMakeLists.txt"]))
        # ... and man/CMakeLists.txt installs each of them.
        installed = re.search(r"set\(man_pages\s(.*?)\)", read("man/CMakeLists.txt"), re.S)
        self.assertEqual(sorted(installed.group(1).split()), sorted(man_pages()))
        overview = man_text("rlock.1")
        commands = man_section(overview, "COMMANDS")
        see_also = re.sub(r'["\s]', "", man_section(overview, "SEE ALSO"))
        for verb in HELP_ORDER:
            self.assertIn(f"rlock-{verb}(1)", commands, verb)
        for page in man_pages():
            name, section = page.rsplit(".", 1)
            text = man_text(page)
            self.assertRegex(text, re.compile(rf"^\.TH {re.escape(name.upper())} {section} "
                                              r'\d{4}-\d\d-\d\d "rlock [\d.]+" "', re.M), page)
            self.assertRegex(text, re.compile(rf"^\.SH NAME\n{re.escape(name)} - ", re.M), page)
            for heading in ("SYNOPSIS", "DESCRIPTION", "SEE ALSO") if section != "7" else (
                    "DESCRIPTION", "SEE ALSO"):
                self.assertIsNotNone(man_section(text, heading), (page, heading))
            if page != "rlock.1":
                self.assertIn(f"{name}({section})", see_also, "rlock(1)'s SEE ALSO")
                self.assertIn("rlock(1)", re.sub(r'["\s]', "", man_section(text, "SEE ALSO")),
                              page)
        for other in ("flock(1)", "redis-cli(1)", "crontab(5)", "systemd.timer(5)",
                      "systemd.service(5)"):
            self.assertIn(other, see_also)

    def test_the_overview_reads_through(self):
        # rlock(1) is short enough to read through: what rlock is, the commands a line each,
        # examples right after them, the options every command shares, and util-linux's
        # sections.
        text = read("man/rlock.1")
        self.assertLess(len(text.splitlines()), 450)
        sections = re.findall(r"^\.SH (.+)$", text, re.M)
        self.assertEqual(sections[:5], ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "EXAMPLES"])
        self.assertLess(sections.index("EXAMPLES"), sections.index("OPTIONS"))
        for heading in ("ENVIRONMENT", "FILES", "REPORTING BUGS", "AVAILABILITY", "SEE ALSO"):
            self.assertIn(heading, sections)
        self.assertEqual(sections[-3:], ["REPORTING BUGS", "AVAILABILITY", "SEE ALSO"])
        synopsis = man_section(man_text("rlock.1"), "SYNOPSIS")
        for verb in HELP_ORDER + ["help"]:
            self.assertRegex(synopsis, re.compile(rf"^rlock {re.escape(verb)}( |$)", re.M), verb)

    def test_layout_names_every_source_file(self):
        # ARCHITECTURE.md's Layout names every folder of src/, and each folder's README.md
        # every file in it, and nothing that is not there.
        layout = read("docs/ARCHITECTURE.md").split("## Layout")[1].split("\n## ")[0]
        folders = {f for f in os.listdir(os.path.join(SOURCE, "src"))
                   if os.path.isdir(os.path.join(SOURCE, "src", f))}
        named = set(re.findall(r"^\| `(\w+)/` \|", layout, re.M))
        self.assertEqual(named, folders, "src/'s folders and ARCHITECTURE.md's Layout")
        for folder in sorted(folders):
            readme = read(f"src/{folder}/README.md")
            cells = [l.split("|")[1] for l in readme.splitlines() if l.startswith("| `")]
            named = {n for cell in cells for n in re.findall(r"`([\w/.]+)`", cell)}
            tree = {f if os.path.isfile(os.path.join(SOURCE, "src", folder, f)) else f + "/"
                    for f in os.listdir(os.path.join(SOURCE, "src", folder))
                    if f.endswith((".cpp", ".h")) or
                    os.path.isdir(os.path.join(SOURCE, "src", folder, f))}
            self.assertEqual(sorted(tree - named), [], f"in src/{folder} but not in its README")
            self.assertEqual(sorted(named - tree), [], f"in src/{folder}/README.md but not there")
            self.assertIn("\nMay include: ", readme)

    def test_the_acl_lines_are_the_readmes_each_on_one_line(self):
        # Pasted into redis-cli, each line is one command: a line broken in two is two.
        def acl_lines(text):
            return [line.strip() for line in text.splitlines() if "ACL SETUSER rlock " in line]
        readme = [line for line in acl_lines(read("docs/REDIS.md")) if line.startswith("ACL")]
        self.assertGreaterEqual(len(readme), 3)
        self.assertEqual(acl_lines(man_text("rlock-redis.7").replace("\\e", "\\")), readme)

    def test_man_renders_without_warnings(self):
        man = shutil.which("man")
        self.assertIsNotNone(man, "man is needed (man-db)")
        for page in man_pages():
            r = subprocess.run([man, "--warnings", "-l", os.path.join(SOURCE, "man", page)],
                               capture_output=True, text=True, env=dict(os.environ, MANWIDTH="80"))
            self.assertEqual((r.returncode, r.stderr), (0, ""), page)
            self.assertIn("SEE ALSO", r.stdout, page)
            if page.endswith(".1"):
                self.assertIn("EXIT STATUS", r.stdout, page)

    def test_man_page_is_lint_clean(self):
        mandoc = shutil.which("mandoc")
        self.assertIsNotNone(mandoc, "mandoc is needed (packaging/setup-debian.sh installs it)")
        for page in man_pages():
            r = subprocess.run([mandoc, "-Tlint", os.path.join(SOURCE, "man", page)],
                               capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""), page)


def code_blocks(markdown):
    """The README's fenced code blocks, as (language, text), indentation removed."""
    blocks = re.findall(r"^( *)```(\w*)\n(.*?)^ *```", markdown, re.M | re.S)
    return [(lang, "\n".join(line[len(indent):] for line in block.splitlines()))
            for indent, lang, block in blocks]


def man_example_blocks():
    """The man pages' EXAMPLES, rlock(1)'s first: the text of each .nf block, as a reader sees
    it."""
    blocks = []
    for page in man_pages():
        section = man_section(man_text(page), "EXAMPLES") or ""
        blocks += [block.strip("\n")
                   for block in re.findall(r"^\.nf\n(.*?)^\.fi", section, re.M | re.S)]
    return blocks


CRON = re.compile(r"^([\d*/,-]+\s+){5}")  # m h dom mon dow


def rlock_words(line):
    """The words of the rlock invocation in LINE (shell, cron or systemd), up to the end of its
    command (a pipe, ';', '||', '&&', ')', a comment), or None."""
    match = re.search(r"(?:^|[\s=(])(?:/usr/bin/)?rlock (?=[a-z-]+)", line)
    if not match:
        return None
    rest = re.split(r"\s(?:\|\|?|;|&&|#)\s|\)|;\s|\s#", line[match.end():])[0]
    try:
        words = shlex.split(rest)
    except ValueError:
        return None
    return words if words and words[0] in VERBS else None


class Example:
    """One rlock command line of the docs, with what the docs say it prints and returns."""

    def __init__(self, line, words):
        self.line, self.words = line, words
        self.output = []    # the lines shown after a "$ " command
        self.status = None  # the number shown after "; echo $?"

    def __repr__(self):
        return repr(self.line)


def examples_of(block):
    """The rlock commands of a code block. In a block of "$ " prompts, the lines after a prompt
    are its output, and the last of them is its status when the command ends in 'echo $?'."""
    out = []
    prompts = any(line.startswith("$ ") for line in block.splitlines())
    current = None
    for line in block.splitlines():
        if prompts and not line.startswith("$ "):
            if current:
                current.output.append(line)
            continue
        current = None
        words = rlock_words(line[2:] if prompts else line)
        if words:
            current = Example(line, words)
            out.append(current)
    for e in out:
        if e.line.rstrip().endswith("echo $?") and e.output and e.output[-1].isdigit():
            e.status = int(e.output.pop())
    return out


class Examples(unittest.TestCase):
    """Every rlock command line of the README and of the man pages' EXAMPLES runs as written,
    in the order a reader meets them, against one private Redis, with `true` for the job: it
    parses, returns what the docs show after "echo $?" (a status among 0, 1 and 75 where they
    show none), and prints the first word they show. Where the shown output has the lock held,
    a holder takes it first, as the host the output names."""

    @classmethod
    def setUpClass(cls):
        cls.server = RedisServer()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def examples(self):
        found = []
        for doc in ("README.md", "docs/REDIS.md"):
            text = read(doc)
            found += [e for lang, block in code_blocks(text) if lang in ("sh", "cron", "")
                      for e in examples_of(block)]
            # `rlock VERB ARGS...` in the text, also where it wraps a line (not a bare
            # `rlock VERB`, nor a synopsis: `rlock status [--json] KEY...`).
            for code in re.findall(r"`(rlock [^`]+)`", text):
                code = " ".join(code.split())
                if len(code.split()) > 2 and not re.search(r"\[|\b(KEY|PATTERN|[NPDT])\b", code):
                    found += examples_of(code)
        found += [e for block in man_example_blocks() for e in examples_of(block)]
        # Each command's help ends with examples.
        for verb in HELP_ORDER:
            shown = help_of(verb).split("\nExamples:\n")
            if len(shown) > 1:
                found += examples_of(shown[1].split("\n\n")[0])
        return found

    def holder_for(self, example, env):
        """A process holding the example's key when its shown output has it held: rlock run as
        the host the output names."""
        shown = "\n".join(example.output)
        if not re.search(r"\bheld\s+by\b|^state\s+held|released by force", shown, re.M):
            return None
        host = re.search(r"(?:by|holder)\s+(\S+) pid", shown).group(1)
        key = next(w for w in example.words[1:] if w.startswith("lock:"))
        holder = start_rlock(["run", key, "--", "sleep", "60"], env=dict(env, RLOCK_HOSTNAME=host),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: self.server.cmd("GET", key), 10, f"{host} holding {key}")
        return holder

    def watch_briefly(self, args, env):
        """rlock watch runs until interrupted: its first two lines (how it watches, the lock's
        state), then Ctrl-C, which ends it with 0."""
        import threading
        proc = start_rlock(args, env=env)
        timer = threading.Timer(30, proc.kill)  # a deadline for the reads below
        timer.start()
        try:
            lines = proc.stdout.readline() + proc.stdout.readline()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            timer.cancel()
        return subprocess.CompletedProcess(args, proc.returncode, lines + out, err)

    def test_every_example_runs_as_shown(self):
        examples = self.examples()
        self.assertGreater(len(examples), 25)
        self.assertGreater(len([e for e in examples if e.status is not None]), 6)
        home = tempfile.mkdtemp(prefix="rlock-docs-")
        self.addCleanup(shutil.rmtree, home, True)
        env = rlock_env(self.server, XDG_CONFIG_HOME=home, HOME=home)
        token = "0" * 32
        for example in examples:
            args, script = [], None
            for word in example.words:
                if "--" in args:
                    break  # the job itself: `true` below
                if word.startswith("$HOME/"):  # as cron's shell expands it
                    word = home + word[len("$HOME"):]
                if word == "$$":  # acquire --while-pid $$: a script that ends after the example
                    script = subprocess.Popen(["sleep", "30"])
                    word = str(script.pid)
                args.append(token if word in ("$t", "$tok") else word)
            if "--" in args:
                args.append("true")
            if "-c" in args:
                args[args.index("-c") + 1] = "true"
            holder = self.holder_for(example, env)
            if args[0] == "watch":
                r = self.watch_briefly(args, env)
            else:
                r = run_rlock(args, env=env, timeout=30)
            if holder:
                os.killpg(holder.pid, signal.SIGTERM)
                holder.wait(timeout=10)
            if "acquire" in args and r.returncode == 0:
                token = r.stdout.strip()  # t=$(rlock acquire ...)
            if script:  # its keeper gives the lock back when it ends
                script.kill()
                script.wait()
                key = args[-1]
                wait_until(lambda: self.server.cmd("EXISTS", key) == 0, 10, f"{key} released")
            if example.status is not None:
                self.assertEqual(r.returncode, example.status, f"{example}: {r.stderr}")
            else:
                self.assertIn(r.returncode, (0, 1, 75), f"{example}: {r.stderr}")
            if example.output:
                printed = (r.stdout or r.stderr).split()
                self.assertEqual(printed[:1], example.output[0].split()[:1], example)

    def test_cron_lines_use_absolute_paths(self):
        cron = [line for lang, block in code_blocks(read("README.md")) if lang == "cron"
                for line in block.splitlines() if CRON.match(line)]
        cron += [line for block in man_example_blocks() for line in block.splitlines()
                 if CRON.match(line)]
        self.assertGreaterEqual(len(cron), 2)
        for line in cron:
            self.assertRegex(line, r"\s/usr/bin/rlock ", line)
            if rlock_words(line)[0] != "run":
                continue  # rlock check: no job
            job = line.split(" -- ", 1)[1] if " -- " in line else ""
            self.assertTrue(job.startswith("/"), f"cron runs the job without a PATH: {line}")


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
    @classmethod
    def setUpClass(cls):
        cls.script = completion_file("bash")

    @classmethod
    def tearDownClass(cls):
        os.unlink(cls.script)

    def complete(self, *words):
        return self.complete_env(dict(os.environ), *words)

    def test_verbs_flags_and_values(self):
        self.assertEqual(self.complete("rlock", "ru"), {"run"})
        self.assertEqual(self.complete("rlock", "co"), {"completion", "config"})
        self.assertEqual(self.complete("rlock", "c"), {"check", "completion", "config"})
        self.assertEqual(self.complete("rlock", "check", "k", "--e"), {"--every"})
        self.assertEqual(self.complete("rlock", "re"), {"release", "reset-period", "resume"})
        self.assertEqual(self.complete("rlock", "reset-period", "k", "--o"), {"--once-per"})
        self.assertIn("--tls", self.complete("rlock", "status", "--t"))
        self.assertIn("-u", self.complete("rlock", "list", "-"))
        self.assertIn("--force", self.complete("rlock", "release", "k", "--f"))
        self.assertIn("--cacert", self.complete("rlock", "config", "--ca"))
        self.assertIn("--on-lost", self.complete("rlock", "run", "--on"))
        self.assertIn("--min-hold", self.complete("rlock", "run", "--m"))
        self.assertEqual(self.complete("rlock", "run", "--on-lost", ""), {"kill", "ignore"})
        # A value after '=' (readline replaces what follows it), retention's own values, zones
        # and not tzdata's other files, every URL scheme.
        self.assertEqual(self.complete("rlock", "run", "--on-lost="), {"kill", "ignore"})
        self.assertEqual(self.complete("rlock", "run", "--on-lost=k"), {"kill"})
        self.assertEqual(self.complete("rlock", "run", "--retention", ""),
                         {"7d", "30d", "90d", "365d", "inf"})
        self.assertIn("Europe/Berlin", self.complete("rlock", "run", "--tz", "Europe/Ber"))
        self.assertEqual(self.complete("rlock", "run", "--tz", "zone"), set())
        self.assertIn("rediss-sentinel://", self.complete("rlock", "-u", "red"))
        self.assertIn("TERM", self.complete("rlock", "run", "--kill-signal", ""))
        self.assertEqual(self.complete("rlock", "completion", ""), {"bash", "zsh", "fish"})
        self.assertEqual(self.complete("rlock", "help", "comp"), {"completion"})
        self.assertEqual(self.complete("rlock", "help", "conn"), {"connection"})
        # After "--", the command's own completion: commands from $PATH.
        self.assertIn("true", self.complete("rlock", "run", "k", "--", "tru"))
        # Options before the verb, and their values, are not taken for it.
        self.assertIn("--redis", self.complete("rlock", "--re"))
        self.assertEqual(self.complete("rlock", "--redis", "redis://h", "st"), {"status", "stop"})
        self.assertEqual(self.complete("rlock", "-q", "--redis", "redis://h", "release", "k",
                                       "--n"), {"--now"})
        self.assertEqual(self.complete("rlock", "--on-lost", ""), {"kill", "ignore"})
        # Which options take a value is each verb's: -n N for history, a flag for run.
        self.assertEqual(self.complete("rlock", "-n", "5", "history", "k", "--j"), {"--json"})
        self.assertEqual(self.complete("rlock", "-n", "run", "k", "--fa"), {"--fair"})
        self.assertEqual(self.complete("rlock", "--prefix", "status", "status", "k", "--j"),
                         {"--json"})

    def test_the_loader_sources_what_rlock_prints(self):
        from harness import RLOCK
        bindir = os.path.dirname(os.path.abspath(RLOCK))
        env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"])
        loader = os.path.join(SOURCE, "completions/rlock.bash")
        self.assertEqual(self.complete_env(env, "rlock", "ru", script=loader), {"run"})
        self.assertEqual(self.complete_env(env, "rlock", "history", "--c", script=loader),
                         {"--cacert", "--cacertdir", "--cert", "--config", "--connect-timeout",
                          "--command-timeout", "--count"})

    def complete_env(self, env, *words, script=None):
        self.assertTrue(os.path.exists("/usr/share/bash-completion/bash_completion"),
                        "bash-completion is needed (packaging/setup-debian.sh installs it)")
        r = subprocess.run(["bash", "-c", BASH_DRIVER, "driver", script or self.script, *words],
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return set(r.stdout.split())


class ZshAndFish(unittest.TestCase):
    def test_zsh_completion_parses(self):
        zsh = shutil.which("zsh")
        self.assertIsNotNone(zsh, "zsh is needed (packaging/setup-debian.sh installs it)")
        path = completion_file("zsh")
        self.addCleanup(os.unlink, path)
        for script in (path, os.path.join(SOURCE, "completions/_rlock")):
            r = subprocess.run([zsh, "-n", script], capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stderr), (0, ""), script)

    def test_descriptions_tell_options_apart(self):
        # Cut at the first "(", --notify and --password-command both read "run CMD".
        fish = completion("fish")
        said = {name: re.search(rf"-l {name} .*-d '([^']*)'", fish).group(1)
                for name in ("notify", "password-command")}
        self.assertNotEqual(said["notify"], said["password-command"])
        for text in said.values():
            self.assertGreater(len(text.split()), 3, text)

    def test_fish_completion_completes(self):
        from harness import RLOCK
        fish = shutil.which("fish")
        self.assertIsNotNone(fish, "fish is needed (packaging/setup-debian.sh installs it)")
        path = completion_file("fish")
        self.addCleanup(os.unlink, path)
        r = subprocess.run([fish, "-n", path], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        bindir = os.path.dirname(os.path.abspath(RLOCK))
        env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"])
        for script in (path, os.path.join(SOURCE, "completions/rlock.fish")):
            for line, want in (("rlock run --on-lost ", {"kill", "ignore"}),
                               ("rlock completion ", {"bash", "zsh", "fish"}),
                               ("rlock history --cou", {"--count"})):
                r = subprocess.run([fish, "--no-config", "-c", f"source {script}; complete -C '{line}'"],
                                   capture_output=True, text=True, env=env)
                self.assertEqual({out.split("\t")[0] for out in r.stdout.splitlines()}, want,
                                 (script, line, r.stderr))


class Completion(unittest.TestCase):
    def test_a_shell_rlock_does_not_know_is_one_line_and_64(self):
        for args in (["completion", "tcsh"], ["completion"], ["completion", "bash", "zsh"]):
            r = run_rlock(args)
            self.assertEqual(r.returncode, 64, args)
            self.assertEqual(r.stdout, "")
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("no shell 'tcsh' (bash, zsh or fish)", run_rlock(["completion", "tcsh"]).stderr)

    def test_it_reads_no_config_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".toml") as bad:
            bad.write("ttl = [\n")
            bad.flush()
            r = run_rlock(["completion", "bash"], env=rlock_env(RLOCK_CONFIG=bad.name))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_build_installs_what_rlock_prints(self):
        """The build makes completions/rlock.SHELL by running the binary (completions/CMakeLists.txt),
        and installs those files; they are what `rlock completion SHELL` prints now."""
        build = os.environ.get("RLOCK_BUILD_DIR", "")
        made = os.path.join(build, "completions")
        if not os.path.isdir(made):
            self.skipTest(f"no {made}: RLOCK_BUILD_DIR is not rlock's build directory")
        for shell, name in SHELLS.items():
            with open(os.path.join(made, name)) as f:
                self.assertEqual(f.read(), completion(shell), name)


if __name__ == "__main__":
    unittest.main()
