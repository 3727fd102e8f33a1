"""rlock run --keep-output and rlock logs: a run's output still goes where it goes, and its last
SIZE bytes are kept in Redis for the last 5 runs, for any host to read, escaped (man rlock,
"logs"). Three hosts simulated with RLOCK_HOSTNAME."""
import json
import os
import pty
import select
import subprocess
import time
import unittest

from harness import RLOCK, RedisTestCase, append_output, rlock_env, run_measured, wait_until

KEY = "lock:job"
INDEX = "rlock-output:{lock:job}:rlock:outputs"


class Logs(RedisTestCase):

    def host(self, name, **extra):
        return rlock_env(self.server, RLOCK_HOSTNAME=name, T=self.tmp, **extra)

    def fences(self):
        r = self.run_rlock(["history", "--json", KEY])
        return [run["fence"] for run in json.loads(r.stdout)["runs"]]

    def streams(self):
        return sorted(k for k in self.server.cmd("KEYS", "*") if ":rlock:output-" in k)

    def kept_bytes(self, stream):
        return sum(len(e[1][1]) for e in self.server.cmd("XRANGE", stream, "-", "+")
                   if e[1][0] in ("o", "e"))

    def test_a_failed_run_is_read_from_another_host_in_order(self):
        job = ('for i in 1 2 3; do echo "out $i"; echo "err $i" >&2; done; '
               'printf "no newline"; exit 3')
        r = subprocess.run([RLOCK, "run", "--keep-output", "4k", KEY, "-c", job],
                           env=self.host("web-1"), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
        self.assertEqual(r.returncode, 3)
        printed = b"out 1\nerr 1\nout 2\nerr 2\nout 3\nerr 3\nno newline"
        self.assertEqual(r.stdout, printed)  # still where it went, and all of it
        logs = self.run_rlock(["logs", KEY], env=self.host("ops-1"))
        self.assertEqual(logs.returncode, 0, logs.stderr)
        self.assertEqual(logs.stdout, printed.decode())  # one pipe for both: the exact order
        fence = self.fences()[0]
        header = logs.stderr.strip().splitlines()
        self.assertEqual(len(header), 1, logs.stderr)
        self.assertRegex(header[0], rf"^{KEY}: run of fence {fence} on web-1 pid \d+ \(sh\), "
                                    rf"started \S+: exit 3; all of its {len(printed)} B kept$")
        # Kept with the history, and not taken for locks.
        (stream,) = self.streams()
        self.assertEqual(stream, "rlock-output:{lock:job}:rlock:output-%d" % fence)
        self.assertGreater(int(self.server.cmd("PTTL", stream)), 29 * 86400 * 1000)
        self.assertGreater(int(self.server.cmd("PTTL", INDEX)), 29 * 86400 * 1000)
        r = self.run_rlock(["list", "--all"])
        self.assertEqual([line.split()[0] for line in r.stdout.splitlines()], [KEY])

    def test_stdout_and_stderr_to_different_places_are_both_written_on_and_kept(self):
        with open(self.path("out"), "wb") as out, open(self.path("err"), "wb") as err:
            r = subprocess.run([RLOCK, "run", "--keep-output", "16k", KEY, "-c",
                                "echo to-out; echo to-err >&2; seq 1 2000"],
                               env=self.host("web-1"), stdout=out, stderr=err, timeout=30)
        self.assertEqual(r.returncode, 0)
        seq = "".join(f"{i}\n" for i in range(1, 2001))
        with open(self.path("out")) as f:
            self.assertEqual(f.read(), "to-out\n" + seq)
        with open(self.path("err")) as f:
            self.assertEqual(f.read(), "to-err\n")
        logs = self.run_rlock(["logs", KEY])
        # Two pipes: each in its order, the two as rlock read them.
        self.assertEqual(logs.stdout.count("to-err\n"), 1)
        self.assertEqual(logs.stdout.replace("to-err\n", ""), "to-out\n" + seq)

    def test_the_last_size_bytes_of_the_last_five_runs_are_kept(self):
        for i in range(1, 8):
            r = self.run_rlock(["run", "--keep-output", "2k", KEY, "-c",
                                f"seq 1 3000; echo run {i}"], env=self.host(f"web-{i % 3}"))
            self.assertEqual(r.returncode, 0, r.stderr)
        fences = self.fences()
        self.assertEqual(int(self.server.cmd("ZCARD", INDEX)), 5)
        self.assertEqual(self.streams(), sorted("rlock-output:{lock:job}:rlock:output-%d" % f
                                                for f in fences[:5]))
        for stream in self.streams():
            self.assertLessEqual(self.kept_bytes(stream), 2048)
            self.assertGreaterEqual(self.kept_bytes(stream), 2048 - 768)  # less an entry at most
        logs = self.run_rlock(["logs", KEY])
        self.assertTrue(logs.stdout.endswith("3000\nrun 7\n"), logs.stdout[-50:])
        self.assertLessEqual(len(logs.stdout), 2048)
        self.assertIn(f"fence {fences[0]} on web-1", logs.stderr)
        self.assertRegex(logs.stderr, r"exit 0; its last [\d.]+ KiB of [\d.]+ KiB kept")
        logs = self.run_rlock(["logs", KEY, "--run", "5"])
        self.assertTrue(logs.stdout.endswith("run 3\n"), logs.stdout[-50:])
        logs = self.run_rlock(["logs", KEY, "--fence", str(fences[2])])
        self.assertTrue(logs.stdout.endswith("run 5\n"), logs.stdout[-50:])
        # Pushed out: said, with the status of nothing found.
        logs = self.run_rlock(["logs", KEY, "--fence", str(fences[6])])
        self.assertEqual(logs.returncode, 1)
        self.assertEqual(logs.stdout, "")
        self.assertIn(f"no output kept of fence {fences[6]}", logs.stderr)
        logs = self.run_rlock(["logs", "lock:other"])
        self.assertEqual(logs.returncode, 1)
        self.assertIn("no output kept", logs.stderr)

    def test_follow_shows_each_line_as_it_comes_and_ends_with_the_run(self):
        os.mkfifo(self.path("next"))
        self.start(["run", "--keep-output", "64k", KEY, "-c",
                    'echo first; read x < "$T/next"; echo second; exit 4'],
                   env=self.host("web-2"), stdout=subprocess.DEVNULL)
        wait_until(lambda: self.server.cmd("ZCARD", INDEX), what="the run's output kept")
        follow = subprocess.Popen([RLOCK, "logs", "-f", KEY], env=self.host("ops-1"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(follow)

        def line():
            ready, _, _ = select.select([follow.stdout], [], [], 10)
            self.assertTrue(ready, "logs -f showed no line within 10s")
            return follow.stdout.readline()
        self.assertEqual(line(), b"first\n")
        with open(self.path("next"), "w") as f:
            f.write("go\n")
        self.assertEqual(line(), b"second\n")
        self.assertEqual(follow.wait(timeout=10), 0)
        err = follow.stderr.read().decode()
        self.assertIn("running", err.splitlines()[0])
        self.assertIn(f"{KEY}: the run ended: exit 4", err)

    def test_a_frozen_redis_holds_up_neither_the_command_nor_the_lease_and_the_drop_is_said(self):
        job = ('touch "$T/ready"; while [ ! -e "$T/go" ]; do sleep 0.02; done; seq 1 1000000; '
               'touch "$T/done"; while [ ! -e "$T/end" ]; do sleep 0.02; done; echo tail')
        with open(self.path("out"), "wb") as out, open(self.path("err"), "wb") as err:
            run = self.start(["run", "-v", "--command-timeout", "1s", "--keep-output", "64k",
                              KEY, "-c", job], env=self.host("web-1"), stdout=out, stderr=err)
        wait_until(lambda: os.path.exists(self.path("ready")), what="the job's start")
        self.server.freeze()
        try:
            open(self.path("go"), "w").close()
            # 6.9 MB through rlock while Redis does not answer: the command is not held up.
            wait_until(lambda: os.path.exists(self.path("done")), timeout=20,
                       what="the command's output written while Redis was frozen")

            def timed_out():
                with open(self.path("err")) as f:
                    return "keeping the command's output:" in f.read()
            wait_until(timed_out, timeout=20, what="the keeper's send timing out")
        finally:
            self.server.thaw()
        open(self.path("end"), "w").close()
        self.assertEqual(run.wait(timeout=30), 0)  # the lease held: no 76
        with open(self.path("out")) as f:
            self.assertEqual(f.read(), "".join(f"{i}\n" for i in range(1, 1000001)) + "tail\n")
        with open(self.path("err")) as f:
            err = f.read()
        self.assertRegex(err, r"rlock: warning: lock:job: Redis was slow or away.*: [\d.]+ MiB of "
                              r"the command's output were never sent")
        logs = self.run_rlock(["logs", KEY])
        self.assertTrue(logs.stdout.endswith("999999\n1000000\ntail\n"), logs.stdout[-50:])
        self.assertRegex(logs.stderr, r"exit 0; its last [\d.]+ KiB of 6.6 MiB kept")

    def test_memory_stays_near_size_however_fast_the_output_comes(self):
        # 69 MB as fast as seq writes them, through --keep-output 4M: rlock's peak RSS stays
        # under 2 × SIZE + 16 MiB, a wide bound (docs/PERFORMANCE.md "Kept output" measures
        # 12 MiB; 44 MiB when each send copied all that was pending four times over). Not in a
        # sanitizer build, whose RSS tells of the sanitizer (ASan's quarantine).
        n, size = 8_000_000, 4 << 20
        r, peak = run_measured(["run", "--keep-output", "4M", KEY, "--", "seq", "1", str(n)],
                               self.path("peak"), self.host("web-1"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 0, r.stderr)
        if not os.environ.get("RLOCK_SANITIZE"):
            self.assertLess(peak, (2 * size + (16 << 20)) // 1024, f"peaked at {peak} kB")
        # What is kept is the output's last SIZE bytes, an entry (64 KiB) at most less, in order.
        kept = self.run_rlock(["logs", "--raw", KEY]).stdout
        self.assertLessEqual(len(kept), size)
        self.assertGreaterEqual(len(kept), size - 65536)
        lines = kept.split("\n")[1:-1]  # the first may have lost its start
        self.assertEqual(lines, [str(i) for i in range(n - len(lines) + 1, n + 1)])

    def test_control_characters_are_escaped_unless_raw(self):
        printed = (b"\x1b]0;pwned\x07\x1b[31mred\x1b[0m\r\nover\rwritten\n"
                   b"caf\xc3\xa9 \xff\xc2\x9b2J\tend")
        r = subprocess.run([RLOCK, "run", "--keep-output", "1k", KEY, "-c",
                            r"printf '\033]0;pwned\007\033[31mred\033[0m\r\nover\rwritten\n"
                            r"caf\303\251 \377\302\2332J\tend'"], env=self.host("web-3"),
                           capture_output=True, timeout=30)
        self.assertEqual(r.stdout, printed)
        logs = subprocess.run([RLOCK, "logs", KEY], env=self.host("ops-1"), capture_output=True,
                              timeout=30)
        self.assertEqual(logs.stdout.decode(), "\\x1b]0;pwned\\x07\\x1b[31mred\\x1b[0m\r\n"
                                               "over\\x0dwritten\ncafé \\xff\\xc2\\x9b2J\tend")
        raw = subprocess.run([RLOCK, "logs", "--raw", KEY], env=self.host("ops-1"),
                             capture_output=True, timeout=30)
        self.assertEqual(raw.stdout, printed)

    def test_a_terminal_is_left_to_the_command_and_said(self):
        master, slave = pty.openpty()
        try:
            r = subprocess.run([RLOCK, "run", "--keep-output", "1k", KEY, "-c",
                                "test -t 1 && test -t 2 && echo on-a-terminal"],
                               env=self.host("web-1"), stdin=subprocess.DEVNULL, stdout=slave,
                               stderr=slave, timeout=30)
            os.close(slave)
            slave = -1
            text = b""
            while select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                text += chunk
        finally:
            os.close(master)
            if slave >= 0:
                os.close(slave)
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"on-a-terminal", text)
        self.assertIn(b"--keep-output: stdout and stderr are a terminal, left to the command: "
                      b"nothing is kept", text)
        self.assertEqual(self.run_rlock(["logs", KEY]).returncode, 1)

    def test_a_reader_that_goes_away_ends_the_command_as_without_rlock(self):
        r = subprocess.run(f"{RLOCK} run --keep-output 1k {KEY} -- yes | head -1", shell=True,
                           env=self.host("web-1"), capture_output=True, timeout=30,
                           executable="/bin/bash")
        self.assertEqual(r.stdout, b"y\n")
        r = subprocess.run(["bash", "-c", f"{RLOCK} run --keep-output 1k {KEY} -- yes | head -1; "
                                          "echo ${PIPESTATUS[0]}"],
                           env=self.host("web-1"), capture_output=True, timeout=30)
        self.assertEqual(r.stdout.split()[-1], b"141")  # yes died of SIGPIPE, as it would
        self.assert_no_lock(KEY)

    def test_a_slow_reader_gets_all_the_command_wrote(self):
        # The command is done long before its reader reads (slower than --kill-after): every
        # byte is still written on, and the lock is given back only then. 100 kB fit in the two
        # pipes (64 KiB each), so the command ends first whatever rlock holds.
        reader = (f'while [ ! -e "{self.tmp}/done" ]; do sleep 0.05; done; sleep 2; wc -c')
        r = subprocess.run(["bash", "-c", f"{RLOCK} run --kill-after 1s --keep-output 1k {KEY} "
                                          f"-c 'head -c 100000 /dev/zero; touch \"$T/done\"'"
                                          f" | ({reader})"],
                           env=self.host("web-1"), capture_output=True, text=True, timeout=60)
        self.assertEqual(r.stdout.strip(), "100000")
        self.assertEqual(r.stderr, "")
        self.assert_no_lock(KEY)

    def test_a_write_error_drops_the_chunk_and_the_command_goes_on(self):
        r = subprocess.run([RLOCK, "run", "--keep-output", "1k", KEY, "-c",
                            'echo lost; echo "went on" >&2'], env=self.host("web-1"),
                           stdout=open("/dev/full", "w"), stderr=subprocess.PIPE, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("went on\n", r.stderr)
        self.assertIn("5 B of the command's output could not be written on", r.stderr)
        self.assertEqual(sorted(self.run_rlock(["logs", KEY]).stdout.splitlines()),
                         ["lost", "went on"])

    def test_a_piece_sent_again_adds_only_what_redis_did_not_take(self):
        stream = "rlock-output:{lock:job}:rlock:output-7"
        self.server.cmd("ZADD", INDEX, "7", "7 member")

        def send(*pieces, end=""):
            return append_output(self.server, [stream, INDEX], *pieces, end=end)
        self.assertEqual(send((0, "hello")), 1)
        self.assertEqual(send((0, "hello world")), 1)  # the reply was lost; it grew meanwhile
        self.assertEqual(send((2, "llo world"), (11, "!")), 1)  # trimmed in front, and more
        self.assertEqual(send((11, "!"), end="12"), 1)
        self.assertEqual(send((11, "!"), end="12"), 0)  # the end, sent again
        entries = self.server.cmd("XRANGE", stream, "-", "+")
        self.assertEqual([(e[0], e[1]) for e in entries],
                         [("0-1", ["o", "hello"]), ("5-1", ["o", " world"]),
                          ("11-1", ["o", "!"]),
                          ("12-1", ["end", "exited", "status", "0", "skipped", "0"])])

    def test_bad_input_is_refused_and_changes_nothing(self):
        for args, words in ((["run", "--keep-output", "lots", KEY, "--", "true"], "not a size"),
                            (["run", "--keep-output", "17M", KEY, "--", "true"], "too large"),
                            (["run", "--keep-output", "100", KEY, "--", "true"], "too small"),
                            (["logs", KEY, "--run", "0"], "--run"),
                            (["logs", KEY, "--run", "6"], "--run"),
                            (["logs", KEY, "--fence", "x1"], "not a fence"),
                            (["logs", KEY, "--run", "1", "--fence", "2"], "not both")):
            r = self.run_rlock(args)
            self.assertEqual(r.returncode, 64, (args, r.stderr))
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            self.assertIn(words, r.stderr)
        with open(self.path("config.toml"), "w") as f:
            f.write('keep-output = "1 MB"\n')
        r = self.run_rlock(["run", "--config", self.path("config.toml"), KEY, "--", "true"])
        self.assertEqual(r.returncode, 78, r.stderr)
        self.assertIn("config.toml:1", r.stderr)
        redlock = self.run_rlock(["run", "--keep-output", "1k", "-u", self.server.url, "-u",
                                  self.server.url + "/1", "-u", self.server.url + "/2", KEY,
                                  "--", "true"])
        self.assertEqual(redlock.returncode, 64, redlock.stderr)
        self.assertIn("--keep-output needs one Redis", redlock.stderr)
        self.assertEqual(self.server.cmd("KEYS", "*"), [])


if __name__ == "__main__":
    unittest.main()
