"""When a run that keeps its output (--keep-output) last printed, as status, inspect and
list --last-output show it from any host, by the server's clock; and the marks rlock logs
shows where each attempt of a run under --retry began (man rlock, "logs", "inspect")."""
import json
import re
import os
import subprocess

from harness import RLOCK, RedisTestCase, append_output, rlock_env, wait_until

KEY = "lock:job"


class LastOutput(RedisTestCase):

    def inspect(self):
        r = self.run_rlock(["inspect", "--json", KEY])
        self.assertIn(r.returncode, (0, 1), r.stderr)  # held, or not taken yet
        return json.loads(r.stdout)

    def server_ms(self):
        seconds, micros = self.server.cmd("TIME")
        return int(seconds) * 1000 + int(micros) // 1000

    def test_the_last_output_moves_with_the_output_and_stays_while_the_command_is_silent(self):
        for name in ("go", "end"):
            os.mkfifo(self.path(name))
        job = 'echo one; read a < "$T/go"; echo two; read b < "$T/end"'
        run = self.start(["run", "--keep-output", "4k", KEY, "-c", job],
                         env=rlock_env(self.server, T=self.tmp, RLOCK_HOSTNAME="web-1"))
        first = wait_until(lambda: self.inspect()["last_output_at"], what="a first output")
        taken = self.server_ms()
        # Silent for a while: the time stays where the output left it.
        wait_until(lambda: self.server_ms() > taken + 1200, what="the server's clock")
        self.assertEqual(self.inspect()["last_output_at"], first)
        text = self.run_rlock(["inspect", KEY]).stdout
        self.assertRegex(text, r"\nlast output +%s \(\d[\d.]*s ago\)\n" % re.escape(first))
        status = self.run_rlock(["status", KEY])
        self.assertRegex(status.stdout, r"  last output \d[\d.]*s ago")
        self.assertEqual(json.loads(self.run_rlock(["status", "--json", KEY]).stdout)
                         ["locks"][0]["last_output_at"], first)
        # The command prints again: the time moves on.
        with open(self.path("go"), "w") as f:
            f.write("\n")
        later = wait_until(lambda: (self.inspect()["last_output_at"] or "") > first and
                           self.inspect()["last_output_at"], what="the output's time to move")
        self.assertGreater(later, first)
        # list reads it when asked: a command more a lock.
        listed = json.loads(self.run_rlock(["list", "--json", "--last-output"]).stdout)
        self.assertEqual(listed["locks"][0]["last_output_at"], later)
        self.assertIn("last output", self.run_rlock(["list", "--last-output"]).stdout)
        plain = json.loads(self.run_rlock(["list", "--json"]).stdout)
        self.assertIsNone(plain["locks"][0]["last_output_at"])
        self.assertNotIn("last output", self.run_rlock(["list"]).stdout)
        with open(self.path("end"), "w") as f:
            f.write("\n")
        self.assertEqual(run.wait(timeout=30), 0, run.stderr.read())
        # Kept with the history (--retention), in the lock's keys: not under rlock-output:.
        self.assertGreater(int(self.server.cmd("PTTL", "{lock:job}:rlock:last-output")),
                           29 * 86400 * 1000)

    def test_a_run_that_keeps_no_output_has_no_last_output(self):
        os.mkfifo(self.path("end"))
        run = self.start(["run", KEY, "-c", 'echo one; read b < "$T/end"'],
                         env=rlock_env(self.server, T=self.tmp), stdout=subprocess.DEVNULL)
        wait_until(lambda: self.inspect()["state"] == "held", what="the lock")
        self.assertIsNone(self.inspect()["last_output_at"])
        self.assertNotIn("last output", self.run_rlock(["inspect", KEY]).stdout)
        with open(self.path("end"), "w") as f:
            f.write("\n")
        self.assertEqual(run.wait(timeout=30), 0)

    def test_logs_marks_where_each_attempt_began(self):
        # Attempt 1 prints enough that the capture is still at it as it ends; attempt 2 prints
        # nothing: its mark and attempt 3's fall on the same byte.
        job = ('[ "$RLOCK_ATTEMPT" = 1 ] && seq 1 30000; '
               '[ "$RLOCK_ATTEMPT" = 2 ] || echo "out $RLOCK_ATTEMPT"; exit 3')
        first = [str(n) for n in range(1, 30001)] + ["out 1"]
        r = self.run_rlock(["run", "--keep-output", "1M", "--retry", "2", "--retry-delay", "0",
                            KEY, "-c", job])
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(r.stdout.splitlines(), first + ["out 3"])
        logs = self.run_rlock(["logs", KEY])
        self.assertEqual(logs.returncode, 0, logs.stderr)
        self.assertEqual(logs.stdout, r.stdout)  # the command's bytes alone
        runs = json.loads(self.run_rlock(["history", "--json", KEY]).stdout)["runs"]
        acquired = runs[0]["acquired_at"]
        marks = [line for line in logs.stderr.splitlines() if "--- attempt" in line]
        self.assertEqual(len(marks), 2, logs.stderr)
        started = []
        for n, mark in zip((2, 3), marks):
            m = re.fullmatch(rf"rlock: {KEY}: --- attempt {n} \(started (\S+Z)\) ---", mark)
            self.assertIsNotNone(m, mark)
            started.append(m.group(1))
        # The server's clock as each attempt began: after the lock was taken, in their order.
        self.assertLessEqual(acquired, started[0])
        self.assertLessEqual(started[0], started[1])
        # In its place among the output, where both go to one terminal.
        both = subprocess.run([RLOCK, "logs", KEY], env=rlock_env(self.server),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=30).stdout.splitlines()
        self.assertEqual(both[1:], first + [marks[0], marks[1], "out 3"], both[-5:])
        # --raw leaves the command's bytes as they are: the marks are on stderr still.
        raw = self.run_rlock(["logs", "--raw", KEY])
        self.assertEqual(raw.stdout, r.stdout)
        self.assertEqual([line for line in raw.stderr.splitlines() if "--- attempt" in line],
                         marks)

    def test_a_run_without_retries_has_no_marks(self):
        r = self.run_rlock(["run", "--keep-output", "4k", KEY, "-c", "echo once"])
        self.assertEqual(r.returncode, 0, r.stderr)
        logs = self.run_rlock(["logs", KEY])
        self.assertEqual(logs.stdout, "once\n")
        self.assertNotIn("--- attempt", logs.stderr)
        self.assertEqual([k for k in self.server.cmd("KEYS", "*") if k.endswith("-attempts")], [])

    def test_a_send_that_adds_no_bytes_leaves_the_last_output(self):
        stream = "rlock-output:{lock:job}:rlock:output-7"
        index = "rlock-output:{lock:job}:rlock:outputs"
        last = "{lock:job}:rlock:last-output"
        self.server.cmd("ZADD", index, "7", "7 member")

        def send(*pieces, end=""):
            append_output(self.server, [stream, index, last, stream + "-attempts"], *pieces,
                          end=end)
            return self.server.cmd("ZSCORE", last, "7")
        first = send((0, "hello"))
        self.assertIsNotNone(first)
        wait_until(lambda: self.server_ms() > int(first) + 5, what="the server's clock")
        self.assertEqual(send((0, "hello")), first)  # sent again: nothing added
        later = send((0, "hello"), (5, "!"))  # and more
        self.assertGreater(int(later), int(first))
        wait_until(lambda: self.server_ms() > int(later) + 5, what="the server's clock")
        self.assertEqual(send(end="6"), later)  # the end alone
