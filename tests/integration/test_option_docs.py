"""Each option is described alike wherever it is described: its value's name, its default, its
limits and the values it is offered agree between `rlock VERB --help` (made from the same
tables as the parser), the man pages, the README and the completions. What can be generated is
checked against rlock itself: the defaults against `rlock config --json`, the limits a help
names by giving rlock the values at and just beyond them, and every value a completion offers
or the README gives by giving it to rlock. test_docs checks that every option is named everywhere; this, that what is said
of it agrees."""
import json
import os
import re
import shlex
import shutil
import tempfile
import unittest

from harness import RedisServer, run_rlock
from test_docs import WITH_OPTIONS, completion, help_of, long_options, man_section, man_text, read

# The value's name in --help and in the man pages: one word for one thing.
VALUE_WORDS = {"D": "duration", "N": "n", "SIG": "signal", "PATH": "path", "FILE": "file",
               "DIR": "dir", "URL": "url", "TEXT": "text", "CMD": "command", "ZONE": "zone",
               "PERIOD": "period", "SIZE": "size", "CODES": "codes", "NAME": "name", "PID": "pid",
               "TOKEN": "token", "FENCE": "fence", "TIME": "time"}
# A value worth comparing: a number, with a unit of time or size, ttl/N, or inf.
VALUE_TOKEN = re.compile(r"(?<![\w/.,-])(?<!\w\()(\d+(?:\.\d+)?(?:ms|s|m|h|d|k|M|G)?|ttl/\d|inf)(?![\w/-])")
# Help's "(default 30s" / "(default: no limit" / "kill the command (default)".
HELP_LINE = re.compile(r"^  (?:(-[A-Za-z]), |    )(--[a-z][a-z-]*)(?: (\S+))?(?: {2,}(\S.*))?$")
UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
UNIT_BYTES = {"k": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class Entry:
    """What one place says of an option: the name of its value (None for a flag), its text, its
    one-letter spelling ("-w") and, for a man page's entry, whether it sends the reader to
    rlock-run(1) for the rest ("as for rlock-run(1)", in it or atop its subsection)."""

    def __init__(self, value, text, short=None, defers=False):
        self.value, self.text = value, " ".join(text.split())
        self.short, self.defers = short, defers

    def tokens(self):
        return set(VALUE_TOKEN.findall(self.text))

    def aliases(self):
        """The other spellings the help names: "Also --nonblock, --nb." """
        m = re.search(r"Also ((?:--?[\w-]+(?:, )?)+)\.", self.text)
        return long_options(m.group(1)) if m else set()

    def choices(self):
        return self.value.split("|") if self.value and "|" in self.value else None


def help_entries(text):
    """{--long: Entry} of a --help text's option lists; the paragraph that names the
    connection options (listed by `rlock help connection`) is left out, as are the examples."""
    entries, current, skip = {}, None, False
    for line in text.splitlines():
        if line and not line.startswith(" "):
            current, skip = None, line.startswith(("Connection, also", "Examples", "Usage"))
            continue
        if skip:
            continue
        m = HELP_LINE.match(line)
        if m:
            current = m.group(2)
            entries[current] = [m.group(3), m.group(4) or "", m.group(1)]
        elif current and re.match(r"^ {20,}\S", line):
            entries[current][1] += " " + line.strip()
    return {name: Entry(value, text, short) for name, (value, text, short) in entries.items()}


def man_entries(page):
    """{--long: Entry} of a man page's OPTIONS: each .TP tag (and the .TQ tags stacked on it)
    with the text under it, up to the next entry or subsection."""
    options = man_section(man_text(page), "OPTIONS") or ""
    entries = {}
    for subsection in re.split(r"^\.SS .*\n", options, flags=re.M):
        blocks = re.split(r"^\.TP\n", subsection, flags=re.M)
        lead_defers = "rlock-run (1)" in blocks[0]
        for block in blocks[1:]:
            lines = block.split("\n")
            tags = [lines[0]]
            i = 1
            while i + 1 < len(lines) and lines[i] == ".TQ":
                tags.append(lines[i + 1])
                i += 2
            body = []
            for line in lines[i:]:
                if line.startswith((".PP", ".SH")):
                    break
                body.append(re.sub(r"^\.(?:B|I|BR|RB|BI|IR|RI|IB)\s", "", line).replace('"', ""))
            text = "\n".join(body)
            for tag in tags:
                words = shlex.split(tag)[1:]  # .BI -c ", " --command " text"
                values = [w.strip() for w in words if w.startswith(" ") and w != ", "]
                for name in long_options(tag):
                    entries[name] = Entry(values[-1] if values else None, text,
                                          defers=lead_defers or "rlock-run (1)" in text)
    return entries


def man_entry(verb, option):
    """Where a reader of rlock-VERB(1) finds OPTION: its own page, else rlock(1) (the options
    every command takes), else, for config, rlock-run(1) (config takes every setting). An
    entry that sends the reader to rlock-run(1) says what that one says too."""
    pages = [f"rlock-{verb}.1", "rlock.1"] + (["rlock-run.1"] if verb == "config" else [])
    for page in pages:
        entry = man_entries(page).get(option)
        if not entry:
            continue
        run = man_entries("rlock-run.1").get(option)
        if page != "rlock-run.1" and run and entry.defers:
            entry = Entry(entry.value, entry.text + "\n" + run.text, defers=True)
        return page, entry
    return None, None


def every_help():
    """{verb: {--long: Entry}}, the connection options from `rlock help connection`."""
    out = {verb: help_entries(help_of(verb)) for verb in WITH_OPTIONS}
    r = run_rlock(["help", "connection"])
    assert r.returncode == 0, r.stderr
    connection = help_entries(r.stdout)
    assert "--redis" in connection and "--command-timeout" in connection, connection.keys()
    return out, connection


def in_units(token, op):
    """TOKEN (a duration, a size or a number) moved by one of its smallest unit: OP is +1 or -1.
    None when it is not a plain quantity (ttl/2, inf)."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d|k|M|G)?", token)
    if not m:
        return None
    n, unit = int(m.group(1)), m.group(2)
    if unit in UNIT_MS:
        return f"{n * UNIT_MS[unit] + op}ms"
    if unit in UNIT_BYTES:
        return str(n * UNIT_BYTES[unit] + op)
    return str(n + op)


def stated_limits(text):
    """The limits a help text states: [(lowest, highest)], either None when unstated.
    "0 to 255", "1k to 16M, or 0 for none", "0 (none) to 9999999", "at least 100ms",
    "at most 1h", "from 1 up"."""
    limits = []
    for low, high in re.findall(r"(?<![\w/])(\d\w*)(?: \([^)]*\))? to (\d\w*)", text):
        limits.append((low, high))
    limits += [(low, None) for low in re.findall(r"at least (\d\w*)", text)]
    limits += [(low, None) for low in re.findall(r"from (\d\w*) up", text)]
    limits += [(None, high) for high in re.findall(r"at most (\d\w*)", text)]
    return limits


class OptionsAgree(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.helps, cls.connection = every_help()
        # The defaults alone: an empty config file, and no RLOCK_ variable (rlock_env).
        cls.tmp = tempfile.mkdtemp(prefix="rlock-option-docs-")
        empty = os.path.join(cls.tmp, "empty.toml")
        open(empty, "w").close()
        r = run_rlock(["config", "--json", "--config", empty])
        assert r.returncode == 0, r.stderr
        shown = json.loads(r.stdout)["settings"]
        assert all(s["origin"] == "default" for name, s in shown.items()
                   if s and name != "config"), shown
        cls.defaults = {name: s["value"] for name, s in shown.items() if s}
        cls.settings = set(shown)
        cls.redis = RedisServer()

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()
        shutil.rmtree(cls.tmp, True)

    def each_option(self):
        """(verb, --long, help Entry, man page, man Entry) for every option of every help."""
        for verb, entries in list(self.helps.items()) + [("connection", self.connection)]:
            for option, entry in entries.items():
                if option == "--help":
                    continue
                page, man = man_entry("run" if verb == "connection" else verb, option)
                self.assertIsNotNone(page, f"{verb} {option}: no man page describes it")
                yield verb, option, entry, page, man

    def test_value_names_agree(self):
        for verb, option, entry, page, man in self.each_option():
            where = f"rlock {verb} {option}, as {page} says it"
            if entry.value is None:
                self.assertIsNone(man.value, f"{where}: a flag in --help, takes a value in man")
            elif entry.choices():
                self.assertEqual(man.choices(), entry.choices(), where)
            else:
                self.assertIn(entry.value, VALUE_WORDS, f"{where}: a value name of its own")
                self.assertEqual(man.value, VALUE_WORDS[entry.value], where)

    def test_the_values_help_names_are_the_man_pages(self):
        """Every default, limit and example value of an option's help is in its man entry."""
        for verb, option, entry, page, man in self.each_option():
            missing = sorted(entry.tokens() - man.tokens())
            self.assertEqual(missing, [], f"rlock {verb} {option}: in --help, not in {page}: "
                                          f"{entry.text!r} vs {man.text!r}")

    def test_defaults_are_the_settings_table(self):
        """A setting's default, as `rlock config` has it, is what the help and the man page say."""
        checked = 0
        for verb, option, entry, page, man in self.each_option():
            name = option[2:]
            default = self.defaults.get(name)
            if default in (None, "", "false", "0s") or entry.value is None:
                continue
            if re.search(r"default: [a-z]", entry.text):
                continue  # a command's own default ("the ttl the lock was taken with")
            checked += 1
            for where, text in ((f"rlock {verb} --help", entry.text), (page, man.text)):
                if entry.choices():
                    # "kill the command (default) or ignore it": the last choice before it.
                    before = re.split(r"\((?:the )?default\b", text)[0]
                    named = [w for w in re.findall(r"\w+", before) if w in entry.choices()]
                    self.assertTrue(named, f"{where}, {option}: no default named")
                    self.assertEqual(named[-1], default, f"{where}, {option}")
                else:
                    # "default 30s", "default $RLOCK_REDIS_URL, ..., else redis://..."
                    self.assertRegex(text, rf"[Dd]efault:? (?:[^;]*?\belse )?"
                                           rf"{re.escape(default)}(?![\w/])",
                                     f"{where}, {option}: the default is {default}")
        self.assertGreater(checked, 15)

    def test_the_limits_help_states_are_rlocks(self):
        checked = 0
        for verb, option, entry, _, _ in self.each_option():
            for low, high in stated_limits(entry.text):
                for edge, op in ((low, -1), (high, +1)):
                    if edge is None or in_units(edge, op) is None:
                        continue
                    checked += 1
                    inside = run_value(self.settings, verb, option, edge, self.redis.url)
                    self.assertNotEqual(inside.returncode, 64,
                                        f"{verb} {option} {edge}: {inside.stderr}")
                    beyond = in_units(edge, op)
                    outside = run_value(self.settings, verb, option, beyond, self.redis.url)
                    self.assertEqual(outside.returncode, 64,
                                     f"{verb} {option} {beyond}, beyond {entry.text!r}")
                    self.assertIn(option, outside.stderr)
        self.assertGreater(checked, 10)

    def test_the_readmes_values_are_rlocks(self):
        """Each value the README and docs/REDIS.md give an option, in a code span, a shell or
        cron line, is one rlock takes (`--ttl 10s`), or the name --help gives the value
        (`--heartbeat-file PATH`)."""
        options = {verb: {} for verb in self.helps}
        for verb, option, entry, _, _ in self.each_option():
            for name in ({option, entry.short} | entry.aliases()) - {None}:
                if verb == "connection":
                    for each in options.values():
                        each.setdefault(name, (option, entry))
                else:
                    options[verb].setdefault(name, (option, entry))
        anywhere = {}
        for verb in options:
            for name, owner in options[verb].items():
                anywhere.setdefault(name, (verb,) + owner)
        given = readme_option_values(options, anywhere)
        self.assertGreater(len(given), 40)
        for verb, option, entry, value, piece in given:
            said = f"the README's {piece!r}: {option} {value}"
            if re.fullmatch(r"[A-Z]+|[a-z]+(?:\|[a-z]+)+", value):  # D, kill|ignore
                self.assertEqual(value, entry.value, said)
            elif entry.value not in ("TEXT", "CMD") and "$" not in value:
                # Free text (-c, --notify, --reason) is anything; the rest must parse.
                r = run_value(self.settings, verb, option, value, self.redis.url)
                self.assertNotEqual(r.returncode, 64, f"{said}: {r.stderr}")


# The options a setting needs beside it (--retry-delay means nothing without --retry).
NEEDS = {"--retry-delay": ["--retry", "1"], "--retry-on": ["--retry", "1"],
         "--notify-on": ["--notify", "true"], "--notify-after": ["--notify", "true"],
         "--notify-timeout": ["--notify", "true"], "--retry-failed": ["--once-per", "day"],
         "--tz": ["--once-per", "day"], "--slower-than": ["--every", "day"]}


def readme_option_values(options, anywhere):
    """(verb, --long, help Entry, value, where) for each option given a value in README.md and
    docs/REDIS.md (the user's docs; NEWS.md also names spellings of the past): in the lines of
    their code blocks and in their code spans, up to the "--" that starts the job's own words.
    OPTIONS is {verb: {-x or --long: (--long, Entry)}}, ANYWHERE the same for any verb (a span
    such as `--ttl 10s` names none)."""
    text = read("README.md") + "\n" + read("docs/REDIS.md")
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    pieces = [line.lstrip("$ ") for block in blocks for line in block.splitlines()]
    spans = re.findall(r"`([^`]+)`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
    pieces += [" ".join(span.split()) for span in spans]  # a span may wrap
    out = []
    for piece in pieces:
        try:
            words = shlex.split(piece)
        except ValueError:
            continue  # a fragment of shell, such as one half of a quoted line
        # rlock's own words: after "rlock" (not runuser's -u before it), or a span of options.
        start = next((i + 1 for i, w in enumerate(words) if w == "rlock" or w.endswith("/rlock")),
                     0 if piece.startswith("-") else None)
        if start is None:
            continue
        verb = words[start] if start < len(words) and words[start] in options else None
        for i, word in enumerate(words[start:], start):
            if word == "--" or word in ("|", "&&", "||", ";"):
                break
            if not word.startswith("-") or word == "-":
                continue
            name, _, value = word.partition("=")
            known = options[verb] if verb else {n: o[1:] for n, o in anywhere.items()}
            if name not in known or known[name][1].value is None:
                continue
            if not value:
                if i + 1 >= len(words):
                    continue
                value = words[i + 1]
            long, entry = known[name]
            owner = verb or anywhere[name][0]
            out.append((owner if owner != "connection" else "status", long, entry, value, piece))
    return out


def run_value(settings, verb, option, value, url):
    """rlock VERB OPTION VALUE as its parser takes it: a setting (one of SETTINGS) through
    `rlock config`, which checks every setting's value, a command's own option on a key
    nothing holds, against the Redis at URL."""
    if option[2:] in settings:
        args = ["config", option, value] + NEEDS.get(option, [])
    else:
        args = [verb, "lock:option-docs", option, value] + NEEDS.get(option, [])
    return run_rlock(args + ["-u", url], timeout=20)


def bash_arrays(script):
    """{array name: {verb: [words]}} of the completion script's associative arrays."""
    out = {}
    for name, body in re.findall(r"local -A (\w+)=\(\n(.*?)\n\s*\)", script, re.S):
        out[name] = {verb: words.split() for verb, words in re.findall(r'\[([\w-]+)\]="([^"]*)"', body)}
    return out


def bash_choices(script):
    """{option: [values]} the bash completion offers from a word list."""
    out = {}
    for labels, words in re.findall(r"^\s+([-\w |]+)\)\n\s+COMPREPLY=\(\$\(compgen -W \"([^\"]*)\"",
                                    script, re.M):
        for label in labels.split("|"):
            out[label.strip()] = words.split()
    return out


class CompletionsAgree(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.helps, cls.connection = every_help()
        cls.bash, cls.zsh, cls.fish = (completion(s) for s in ("bash", "zsh", "fish"))
        cls.redis = RedisServer()

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()

    def options_of(self, verb):
        entries = dict(self.helps[verb])
        entries.update(self.connection)
        entries.pop("--help", None)
        return entries

    def test_bash_knows_which_options_take_a_value(self):
        valued = bash_arrays(self.bash)["_rlock_valued"]
        for verb in WITH_OPTIONS:
            takes = set()
            for option, entry in self.options_of(verb).items():
                if entry.value:
                    takes |= ({option, entry.short} | entry.aliases()) - {None}
            self.assertEqual(sorted(valued[verb]), sorted(takes), verb)

    def test_zsh_and_fish_know_which_options_take_a_value(self):
        for verb in WITH_OPTIONS:
            # The zsh function of a verb, and the fish lines of it.
            zsh = self.zsh.split(f"_rlock_{verb.replace('-', '_')}() {{")[1].split("\n}")[0]
            fish = [line for line in self.fish.splitlines()
                    if f"__fish_seen_subcommand_from {verb}'" in line]
            for option, entry in self.options_of(verb).items():
                spec = re.search(rf"'(?:\([^)]*\))?(?:{{[^}}]*}})?{re.escape(option)}(=?)\[", zsh)
                self.assertIsNotNone(spec, f"zsh, {verb} {option}")
                self.assertEqual(spec.group(1) == "=", entry.value is not None, f"zsh {verb} {option}")
                line = next((l for l in fish if f" -l {option[2:]} " in l + " "), None)
                self.assertIsNotNone(line, f"fish, {verb} {option}")
                self.assertEqual(bool(re.search(r" -[xr]\b", line.split(" -d ")[0])),
                                 entry.value is not None,
                                 f"fish {verb} {option}: {line}")
                if entry.choices():
                    self.assertIn(f"-a '{' '.join(entry.choices())}'", line, f"fish {verb}")
                    self.assertIn(f":({' '.join(entry.choices())})'", zsh.split(option, 1)[1]
                                  .split("\n")[0], f"zsh {verb} {option}")

    def test_every_value_offered_is_one_rlock_takes(self):
        """bash offers these words (zsh and fish the same, from the same table); each is a
        value rlock accepts, and an option's choices are the ones its help names."""
        offered = bash_choices(self.bash)
        r = run_rlock(["config", "--json"])
        settings = set(json.loads(r.stdout)["settings"])
        self.assertGreater(len(offered), 8)
        owners = {}
        for verb in WITH_OPTIONS:
            for option, entry in self.options_of(verb).items():
                for name in {option} | entry.aliases():
                    owners.setdefault(name, (verb, option, entry))
        for option, values in offered.items():
            if not option.startswith("--"):
                continue
            self.assertIn(option, owners, f"bash offers values for {option}, which no help has")
            verb, name, entry = owners[option]
            if entry.choices():
                self.assertEqual(values, entry.choices(), option)
            for value in values:
                if value.endswith("://"):
                    continue  # the start of a URL, for the user to finish
                r = run_value(settings, verb, name, value, self.redis.url)
                self.assertNotEqual(r.returncode, 64, f"{verb} {option} {value}: {r.stderr}")

if __name__ == "__main__":
    unittest.main()
