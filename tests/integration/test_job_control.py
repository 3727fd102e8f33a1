"""Job control in a real terminal, as a person uses it (rlock-run(1) "Job control"): tmux runs an
interactive bash, the test types into it and reads its screen. Ctrl-Z stops rlock and its
command and gives the prompt back; `fg` continues both with the terminal; `bg` continues both
and the shell keeps the terminal; a command started with `&` that reads the terminal stops as
it would alone, and `fg` lets it read. A suspension longer than the lease ends the run (76):
the command never runs on unlocked.

The command ticks (appends to a file every 50 ms) so that "stands still" and "runs" are
outcomes on disk, not impressions: stands still means no tick during a pause that spans many
tick periods (a wide bound, not a timing measure).
"""
import os
import re
import shutil
import subprocess
import time
import unittest

from harness import RLOCK, RedisTestCase, rlock_env, wait_until

TMUX = shutil.which("tmux") or "tmux"  # packaging/setup-debian.sh installs it: none is a failure
TICKS = "while :; do echo t >> {ticks}; sleep 0.05; done"
STILL = 0.6  # a pause of twelve tick periods: pacing for "no tick came", not a sync point


class Tmux:
    """An interactive bash in a tmux session on a server of its own."""

    def __init__(self, tmp, env):
        self.socket = os.path.join(tmp, "tmux.sock")
        self.marks = 0
        rc = os.path.join(tmp, "bashrc")
        with open(rc, "w") as f:
            f.write("PS1='$ '\nset +o history\n")
        env = dict(env, TERM="xterm", HOME=tmp)
        subprocess.run([TMUX, "-S", self.socket, "new-session", "-d", "-x", "200", "-y", "50",
                        "bash", "--noprofile", "--rcfile", rc, "-i"], env=env, check=True)
        self.wait_screen("$ ")

    def close(self):
        subprocess.run([TMUX, "-S", self.socket, "kill-server"], capture_output=True)

    def shell_pid(self):
        return int(subprocess.run([TMUX, "-S", self.socket, "display", "-p", "#{pane_pid}"],
                                  capture_output=True, text=True, check=True).stdout)

    def foreground_group(self):
        """The terminal's foreground process group (tpgid in the shell's /proc stat)."""
        with open(f"/proc/{self.shell_pid()}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[5])

    def waits_for_job(self):
        """bash is in waitpid() for its foreground job: `fg` has sent the job its SIGCONT."""
        with open(f"/proc/{self.shell_pid()}/wchan") as f:
            return f.read() == "do_wait"

    def screen(self):
        return subprocess.run([TMUX, "-S", self.socket, "capture-pane", "-p", "-J", "-S", "-200"],
                              capture_output=True, text=True).stdout

    def keys(self, *keys):
        subprocess.run([TMUX, "-S", self.socket, "send-keys"] + list(keys), check=True)

    def line(self, text):
        self.keys("-l", text)
        self.keys("Enter")

    def wait_screen(self, text, timeout=20):
        return wait_until(lambda: text in self.screen() and self.screen(), timeout,
                          f"{text!r} on the screen")

    def shell(self, command, timeout=20):
        """Types COMMAND at the prompt and waits for it to finish; returns its output lines."""
        self.marks += 1
        done = re.compile(rf"mark{self.marks}-(\d+)-end")
        self.line(f"{command}; echo mark{self.marks}-$?-end")
        found = wait_until(lambda: done.search(self.screen()), timeout, f"{command!r} to finish")
        self.last_status = int(found.group(1))
        return found.string[:found.start()]


class JobControl(RedisTestCase):
    def setUp(self):
        super().setUp()
        self.term = Tmux(self.tmp, rlock_env(self.server, R=RLOCK))
        self.ticks = self.path("ticks")

    def tearDown(self):
        self.term.close()  # before the test directory with its socket goes
        super().tearDown()

    def tick_count(self):
        try:
            with open(self.ticks) as f:
                return len(f.readlines())
        except FileNotFoundError:
            return 0

    def assert_ticking(self):
        n = self.tick_count()
        wait_until(lambda: self.tick_count() > n + 2, 10, "the command to run")

    def assert_still(self):
        n = self.tick_count()
        time.sleep(STILL)  # pacing: see STILL
        self.assertEqual(self.tick_count(), n, "the command ran while it should be stopped")

    def ticking(self, ttl="30s", options=""):
        return f"$R run --ttl {ttl} {options} k -- sh -c '{TICKS.format(ticks=self.ticks)}'"

    def held(self):
        return self.server.cmd("GET", "k") is not None

    def test_ctrl_z_stops_both_and_fg_continues_both(self):
        self.ctrl_z_then_fg(self.ticking())

    def test_ctrl_z_and_fg_with_the_output_kept(self):
        # rlock's threads (the output's capture and sender) must not take the SIGCONT of fg,
        # which rlock itself waits for to continue the command.
        self.ctrl_z_then_fg(self.ticking(options="--keep-output 64k"))

    def ctrl_z_then_fg(self, command):
        self.term.line(command)
        self.assert_ticking()
        self.term.keys("C-z")
        self.term.wait_screen("Stopped")
        self.assertIn("suspended with the command (SIGTSTP)", self.term.screen())
        self.assertIn("not renewed while suspended", self.term.screen())
        self.term.shell("true")  # the prompt is back
        self.assert_still()
        self.assertTrue(self.held())
        self.term.line("fg")
        self.assert_ticking()
        self.term.keys("C-c")
        self.term.shell("echo status $?")
        self.assertIn("status 130", self.term.screen())
        wait_until(lambda: not self.held(), 10, "the lock to be released")

    def test_ctrl_s_costs_rlock_neither_its_lease_nor_its_end(self):
        # Ctrl-S (XOFF) stops the terminal's output: every write to it blocks until Ctrl-Q.
        # rlock -v writes a line each renewal; the command writes to a file, not the terminal.
        go, pid = self.path("go"), self.path("rlock.pid")
        # The command ends when the test says so, never while a racer starts (a racer that
        # started as the command ended would rightly take the freed lock).
        self.term.line(f"$R -v run --ttl 1s k -- sh -c 'echo $PPID > {pid}; "
                       f"while [ ! -e {go} ]; do sleep 0.05; done'")
        self.term.wait_screen("acquired")
        self.term.keys("C-s")
        rlock_pid = int(self.wait_file("rlock.pid"))
        # For 3 s, three ttls, no racer gets the lock while rlock's lines pile up behind the
        # stopped terminal.
        stopped = time.monotonic()
        while time.monotonic() - stopped < 3:
            racer = self.run_rlock(["run", "-n", "k", "--", "true"])
            self.assertEqual(racer.returncode, 75, racer.stderr)
            time.sleep(0.2)  # pacing of the racers, not synchronisation
        with open(go, "w"):
            pass
        # rlock ends with its command and gives the lock back, the terminal still stopped.
        wait_until(lambda: not os.path.exists(f"/proc/{rlock_pid}"), 10, "rlock to exit")
        self.assertFalse(self.held())
        self.term.keys("C-q")
        self.term.shell("echo status $?")
        self.assertIn("status 0", self.term.screen())

    def test_bg_continues_both_and_the_shell_keeps_the_terminal(self):
        self.term.line(self.ticking())
        self.assert_ticking()
        self.term.keys("C-z")
        self.term.wait_screen("Stopped")
        self.term.line("bg")
        self.assert_ticking()
        # The terminal's foreground group is the shell's, not the command's.
        self.assertEqual(self.term.foreground_group(), os.getpgid(self.term.shell_pid()))
        # The shell reads the next line: it still has its terminal.
        out = self.term.shell("echo shell-$((6 * 7))")
        self.assertIn("shell-42", out)
        self.term.shell("kill %1; wait %1")
        self.assertEqual(self.term.last_status, 143)
        wait_until(lambda: not self.held(), 10, "the lock to be released")

    def test_a_background_reader_stops_and_fg_gives_it_the_terminal(self):
        for reader in ("cat", "python3 -c 'print(\"got\", input())'"):
            with self.subTest(reader=reader):
                self.term.line(f"$R run k -- {reader} &")
                self.term.wait_screen("(SIGTTIN)")  # as the reader alone would, it stops
                self.assertIn("Stopped", self.term.shell("jobs"))
                self.assertTrue(self.held())
                shown = self.term.screen().count(f"run k -- {reader}")
                self.term.line("fg")
                # bash echoes the job's line as it continues it: only then is the line typed.
                wait_until(lambda: self.term.screen().count(f"run k -- {reader}") > shown, 20,
                           "bash to continue the job")
                self.term.line("typed-line")
                self.term.wait_screen("got typed-line" if "python" in reader else
                                      "typed-line\ntyped-line")
                if reader == "cat":
                    self.term.keys("C-d")
                out = self.term.shell("echo status $?")
                self.assertIn("status 0", out)
                wait_until(lambda: not self.held(), 10, "the lock to be released")
                self.term.shell("clear")

    def test_background_then_fg_then_ctrl_z_stops_the_command(self):
        self.term.line(self.ticking() + " &")
        self.assert_ticking()
        shown = self.term.screen().count("sh -c")
        self.term.line("fg")
        # bash echoes the job's line, then gives the job the terminal: only then does Ctrl-Z
        # reach the job (before, it reaches bash, which ignores it). The terminal's foreground
        # group says when, not the echo (a loaded CI once sent Ctrl-Z in between).
        wait_until(lambda: self.term.screen().count("sh -c") > shown, 20, "bash to run fg")
        shell_group = os.getpgid(self.term.shell_pid())
        wait_until(lambda: self.term.foreground_group() != shell_group, 20,
                   "bash to give the job the terminal")
        # bash gives the terminal, then sends SIGCONT: a Ctrl-Z in between is a SIGTSTP that
        # the SIGCONT discards (the kernel does, for any job). Only once bash waits for the job
        # is Ctrl-Z sure to arrive after it (a loaded CI once lost one there).
        wait_until(self.term.waits_for_job, 20, "bash to wait for the job it continued")
        self.term.keys("C-z")
        self.term.wait_screen("Stopped")
        self.assert_still()
        self.term.line("fg")
        self.assert_ticking()
        self.term.keys("C-c")
        self.term.shell("echo status $?")
        self.assertIn("status 130", self.term.screen())

    def test_a_suspension_longer_than_the_lease_ends_the_run(self):
        self.term.line(self.ticking(ttl="2s"))
        self.assert_ticking()
        self.term.keys("C-z")
        self.term.wait_screen("Stopped")
        wait_until(lambda: not self.held(), 10, "the suspended holder's lock to expire")
        n = self.tick_count()
        self.term.line("fg")
        self.term.shell("echo status $?")
        self.assertIn("status 76", self.term.screen())
        self.assertIn("suspended past its lease", self.term.screen())
        self.assertEqual(self.tick_count(), n, "the command ran on after the lease ended")


if __name__ == "__main__":
    unittest.main()
