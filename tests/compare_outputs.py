#!/usr/bin/env python3
"""Compares what two rlock binaries say to the same input, byte for byte: the check that a
refactoring changed no behaviour a user can see (CONTRIBUTING.md "Refactoring").

    tests/compare_outputs.py BEFORE AFTER

BEFORE is the binary before the change (e.g. built from the previous commit), AFTER the new
one. Compared: the help of rlock and of every command, `rlock config` (text and JSON, with
flags, the environment and a config file) and every case of the bad-input corpus
(tests/integration/test_bad_input.py, run with RLOCK_COMPARE_BIN, against a real
redis-server): exit status, stdout and stderr. Exits 0 when all agree, else 1 listing the
differences.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
COMMANDS = ["run", "status", "inspect", "history", "list", "acquire", "extend", "release",
            "config", "help"]


def invocations(config_path):
    """Command lines (argv after rlock, extra environment) whose whole output is compared."""
    yield ["--help"], {}
    yield ["help"], {}
    yield [], {}
    for c in COMMANDS:
        yield [c, "--help"], {}
        yield ["help", c], {}
    for args in (["config"], ["config", "--json"],
                 ["config", "--ttl", "7s", "-w", "inf", "--limit", "3", "--fair", "-q"],
                 ["config", "--redis", "redis://u:secret@h:1", "--redis", "redis://h:2",
                  "--once-per", "day", "--tz", "Europe/Berlin", "--json"]):
        yield args, {}
        yield args, {"RLOCK_CONFIG": config_path, "RLOCK_PASSWORD": "hunter2",
                     "RLOCK_REDIS_URL": "redis://x:6380/2"}


def run(binary, args, extra_env):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLOCK_")}
    env["HOME"] = "/nonexistent"  # no user's config file
    env.update(extra_env)
    r = subprocess.run([binary] + args, capture_output=True, env=env, timeout=30)
    return r.returncode, r.stdout, r.stderr


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    before, after = (os.path.abspath(p) for p in sys.argv[1:])
    differences = 0
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as config:
        config.write('ttl = "45s"\nkill-signal = "INT"\nhistory-length = 7\n'
                     'password-file = "/run/secrets/redis"\n')
        config.flush()
        cases = list(invocations(config.name))
        for args, extra_env in cases:
            a, b = run(before, args, extra_env), run(after, args, extra_env)
            if a != b:
                differences += 1
                print(f"differs: rlock {' '.join(args)} {extra_env or ''}\n  before: {a}\n"
                      f"  after:  {b}")
    print(f"{len(cases)} help and config outputs compared, {differences} differ")
    env = dict(os.environ, RLOCK_BIN=after, RLOCK_COMPARE_BIN=before)
    corpus = subprocess.run([sys.executable, "-m", "unittest", "test_bad_input"], env=env,
                            cwd=os.path.join(HERE, "integration"))
    sys.exit(1 if differences or corpus.returncode else 0)


if __name__ == "__main__":
    main()
