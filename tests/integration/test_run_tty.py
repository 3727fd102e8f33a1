"""Interactive use under a pseudo-terminal: the child reads the terminal, Ctrl-C reaches it
once, and the terminal is given back as it was."""
import os
import pty
import select
import signal
import time
import unittest

from harness import RLOCK, RedisTestCase, rlock_env, wait_until


class PtySession:
    """A shell as the session leader of a new pseudo-terminal, like a login shell would be."""

    def __init__(self, script, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve("/bin/sh", ["sh", "-c", script], env)
        self.output = b""

    def read_until(self, text, timeout=10):
        want = text.encode()
        deadline = time.monotonic() + timeout
        while want not in self.output:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {text!r}; got {self.output!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: the session ended
                    break
                if not chunk:
                    break
                self.output += chunk
        if want not in self.output:
            raise AssertionError(f"session ended without {text!r}; got {self.output!r}")
        return self.output.decode(errors="replace")

    def write(self, data):
        os.write(self.fd, data)

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        os.close(self.fd)


class Terminal(RedisTestCase):
    def session(self, script):
        s = PtySession(script, rlock_env(self.server, RLOCK_TEST_BIN=RLOCK))
        self.addCleanup(s.close)
        return s

    def test_the_child_reads_the_terminal(self):
        s = self.session('"$RLOCK_TEST_BIN" run k -- sh -c \'printf "name? "; read l; echo "got:$l"\';'
                         ' echo "rc=$?"')
        s.read_until("name? ")
        s.write(b"alice\n")
        out = s.read_until("rc=")
        s.read_until("\n", 5)
        self.assertIn("got:alice", out)
        self.assertIn("rc=0", s.output.decode())
        self.assert_no_lock("k")

    def test_ctrl_c_reaches_the_child_once_and_the_terminal_comes_back(self):
        log = self.path("log")
        child = (f"trap \"echo INT >> {log}; got=1\" INT; echo ready; n=0; "
                 f"while :; do sleep 0.05 & wait $!; "
                 f"if [ -n \"$got\" ]; then n=$((n+1)); [ $n -ge 6 ] && exit 9; fi; done")
        script = (f'before=$(stty -g); "$RLOCK_TEST_BIN" run k -- sh -c \'{child}\'; echo "rc=$?"; '
                  f'[ "$(stty -g)" = "$before" ] && echo modes-restored; '
                  f'[ "$(ps -o tpgid= -p $$ | tr -d " ")" = "$(ps -o pgid= -p $$ | tr -d " ")" ] '
                  f'&& echo foreground-back; echo end')
        s = self.session(script)
        s.read_until("ready")
        s.write(b"\x03")  # Ctrl-C: the terminal signals its foreground process group
        out = s.read_until("end")
        with open(log) as f:
            self.assertEqual(f.read().split(), ["INT"])
        self.assertIn("rc=9", out)
        self.assertIn("modes-restored", out)
        self.assertIn("foreground-back", out)
        self.assert_no_lock("k")

    def test_terminal_modes_are_restored_after_a_child_killed_in_raw_mode(self):
        script = ('before=$(stty -g); "$RLOCK_TEST_BIN" run k -- sh -c "stty raw -echo; kill -KILL \\$\\$";'
                  ' echo "rc=$?"; [ "$(stty -g)" = "$before" ] && echo modes-restored; echo end')
        s = self.session(script)
        out = s.read_until("end")
        self.assertIn("rc=137", out)
        self.assertIn("modes-restored", out)


if __name__ == "__main__":
    unittest.main()
