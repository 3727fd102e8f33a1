"""Signals: forwarded to the child's process group exactly once; a signal aborts a wait."""
import os
import resource
import signal
import time
import unittest

from harness import RedisTestCase, guardian_of, wait_until

# The child records each signal it gets, then lives about 0.3 s more, long enough for a
# duplicate to arrive if one were sent, and exits 0.
COUNTING_CHILD = """
got=
for s in INT TERM HUP QUIT USR1 USR2; do trap "echo $s >> {log}; got=1" $s; done
echo ready > {ready}
n=0
while :; do
  sleep 0.05 & wait $!
  if [ -n "$got" ]; then n=$((n+1)); [ $n -ge 6 ] && exit 0; fi
done
"""


def lines(path):
    try:
        with open(path) as f:
            return f.read().split()
    except FileNotFoundError:
        return []


class SignalForwarding(RedisTestCase):
    def counting_child(self, key):
        log, ready = self.path("log"), self.path("ready")
        p = self.start(["run", key, "--", "sh", "-c", COUNTING_CHILD.format(log=log, ready=ready)])
        self.wait_file("ready")
        return p, log

    def test_each_signal_reaches_the_child_exactly_once(self):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
                    signal.SIGUSR1, signal.SIGUSR2):
            with self.subTest(sig=sig.name):
                for name in ("ready", "log"):
                    if os.path.exists(self.path(name)):
                        os.unlink(self.path(name))
                p, log = self.counting_child("k")
                os.kill(p.pid, sig)
                self.assertEqual(p.wait(timeout=10), 0)  # the child's status, after it handled it
                self.assertEqual(lines(log), [sig.name[3:]])
                self.assert_no_lock("k")

    def test_sigtstp_and_sigcont_reach_rlock_not_its_threads(self):
        # With the output kept, rlock has threads (the capture, the sender): a stop signal
        # must stop the command as rlock's own event, and SIGCONT continue it, whichever
        # thread the kernel offers them to.
        ticks = self.path("ticks")
        p = self.start(["run", "--keep-output", "64k", "k", "--", "sh", "-c",
                        f"while :; do echo x >> {ticks}; sleep 0.02; done"])
        wait_until(lambda: len(lines(ticks)) > 2, 10, "the command to tick")
        os.kill(p.pid, signal.SIGTSTP)

        def still():
            n = len(lines(ticks))
            time.sleep(0.3)  # pacing: a running command ticks 15 times meanwhile
            return len(lines(ticks)) == n
        wait_until(still, 10, "the command to stop with rlock's SIGTSTP")
        os.kill(p.pid, signal.SIGCONT)
        n = len(lines(ticks))
        wait_until(lambda: len(lines(ticks)) > n + 2, 10, "the command to go on after SIGCONT")
        os.kill(p.pid, signal.SIGTERM)
        self.assertEqual(p.wait(timeout=10), 143)
        self.assert_no_lock("k")

    def test_every_signal_that_ends_a_process_reaches_the_command(self):
        # An operator's kill -ALRM, a parent's alarm() inherited across exec, a supervisor's
        # timer: each used to kill rlock and leave the key for its whole ttl. Each reaches the
        # command now, whose end gives the lock back at once.
        # Signals of faults among them: no core file from the command they end.
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        names = ["ALRM", "VTALRM", "PROF", "IO", "PWR", "XCPU", "XFSZ", "STKFLT", "SYS", "TRAP",
                 "ABRT", "BUS", "FPE", "ILL", "SEGV", "RTMIN", "RTMAX"]
        for name in names:
            sig = getattr(signal, "SIG" + name)
            with self.subTest(sig=name):
                ready = self.path(f"ready-{name}")
                # exec: the signal's default action ends the command itself.
                p = self.start(["run", "--ttl", "60s", "k", "--", "sh", "-c",
                                f"echo $$ > {ready}; exec sleep 60"])
                self.wait_file(f"ready-{name}")
                os.kill(p.pid, sig)
                self.assertEqual(p.wait(timeout=10), 128 + sig)  # the command's death by it
                self.assert_no_lock("k")

    def test_winch_reaches_the_command(self):
        log, ready = self.path("log"), self.path("ready")
        body = (f"trap 'echo WINCH >> {log}' WINCH; echo ready > {ready}; "
                f"while [ ! -s {log} ]; do sleep 0.05; done")
        p = self.start(["run", "k", "--", "sh", "-c", body])
        self.wait_file("ready")
        os.kill(p.pid, signal.SIGWINCH)
        self.assertEqual(p.wait(timeout=10), 0)
        self.assertEqual(lines(log), ["WINCH"])

    def test_signals_to_the_guardian_change_nothing(self):
        end = self.path("end")
        p = self.start(["run", "--ttl", "2s", "k", "--", "sh", "-c",
                        f"echo ready > {self.path('ready')}; sleep 2.5; touch {end}"])
        self.wait_file("ready")
        guardian, _ = guardian_of(p.pid)
        for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1,
                    signal.SIGVTALRM, signal.SIGPWR, signal.SIGSEGV, signal.SIGRTMIN):
            os.kill(guardian, sig)
        self.assertEqual(p.wait(timeout=10), 0)
        self.assertTrue(os.path.exists(end), "the command was stopped")
        self.assertNotIn("guardian", p.stderr.read())  # not even replaced
        self.assert_no_lock("k")

    def test_a_signal_to_rlocks_whole_process_group_arrives_once(self):
        # Like a shell or supervisor signalling the job's group: rlock's group is not the child's.
        p, log = self.counting_child("k")
        os.killpg(p.pid, signal.SIGTERM)
        self.assertEqual(p.wait(timeout=10), 0)
        self.assertEqual(lines(log), ["TERM"])

    def test_a_second_term_kills_a_command_that_ignores_the_first(self):
        # An operator's `kill PID` twice stops a job that traps TERM (and what it started),
        # and gives the lock back; a first TERM is only forwarded.
        log, ready = self.path("log"), self.path("ready")
        body = (f"trap 'echo TERM >> {log}' TERM; sleep 300 & echo $! > {ready}.child; "
                f"echo ready > {ready}; while :; do sleep 0.05; done")
        p = self.start(["run", "k", "--", "sh", "-c", body])
        self.wait_file("ready")
        with open(ready + ".child") as f:
            grandchild = int(f.read())
        os.kill(p.pid, signal.SIGTERM)
        wait_until(lambda: lines(log) == ["TERM"], 10, "the first TERM forwarded")
        self.assertIsNone(p.poll(), "one TERM stopped rlock")
        self.assertTrue(self.server.cmd("GET", "k"), "the lock given up after one TERM")
        # Again, as an operator would, until rlock is gone: a TERM that comes within a second
        # of the first is the same request twice; a later one kills.
        def asked_again():
            if p.poll() is None:
                os.kill(p.pid, signal.SIGTERM)
            return p.poll() is not None
        wait_until(asked_again, 10, "rlock to end after TERM again", interval=0.1)
        self.assertEqual(p.wait(), 128 + signal.SIGKILL)
        self.assertIn("TERM again: killing the command's process group", p.stderr.read())
        wait_until(lambda: not os.path.exists(f"/proc/{grandchild}"), 5,
                   "the command's background sleep killed too")
        self.assert_no_lock("k")

    def test_the_child_runs_in_its_own_process_group(self):
        out = self.path("ids")
        p = self.start(["run", "k", "--", "sh", "-c", f"echo $$ $(ps -o pgid= -p $$) > {out}; sleep 30"])
        pid, pgid = self.wait_file("ids").split()
        self.assertEqual(pid, pgid)
        self.assertNotEqual(int(pgid), os.getpgid(p.pid))
        os.kill(p.pid, signal.SIGTERM)
        p.wait(timeout=10)

    def test_a_signal_while_waiting_aborts_with_128_plus_n_and_leaves_nothing(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGRTMIN):
            with self.subTest(sig=sig.name):
                self.server.cmd("FLUSHALL")
                self.server.cmd("SET", "k", "holder", "PX", 60000)
                self.server.cmd("CONFIG", "RESETSTAT")
                marker = self.path("ran")
                p = self.start(["run", "-w", "inf", "k", "--", "touch", marker])
                # rlock is waiting once it has asked Redis at least once.
                wait_until(lambda: "cmdstat_eval" in self.server.cmd("INFO", "commandstats"), 5,
                           "a first acquire attempt")
                os.kill(p.pid, sig)
                self.assertEqual(p.wait(timeout=10), 128 + sig)
                self.assertFalse(os.path.exists(marker))
                self.assertEqual(self.server.cmd("GET", "k"), "holder")
                self.assertEqual(self.server.cmd("DBSIZE"), 1)  # no fence spent, nothing else



def ignored_signals(status_text):
    """The set of signal numbers a /proc/PID/status text says are ignored."""
    mask = int(next(l.split()[1] for l in status_text.splitlines() if l.startswith("SigIgn:")), 16)
    return {n for n in range(1, 65) if mask & (1 << (n - 1))}


class InheritedDispositions(RedisTestCase):
    def run_with_ignored(self, ignored):
        """rlock started with IGNORED signals ignored (as a parent may leave them, across
        exec); returns the signals its command, cat(1) of its own /proc status, has ignored."""
        def ignore():
            for sig in ignored:
                signal.signal(sig, signal.SIG_IGN)
        # cat, not a shell: a shell may set dispositions of its own.
        p = self.start(["run", "k", "--", "cat", "/proc/self/status"], preexec_fn=ignore)
        out, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 0, err)
        self.assert_no_lock("k")
        return ignored_signals(out)

    def test_started_with_sigchld_ignored_rlock_still_sees_its_command_end(self):
        # Under SIG_IGN the kernel reaps children itself: rlock used to wait for an exit it
        # could never see, and renewed the lock for ever.
        self.assertEqual(self.run_with_ignored([signal.SIGCHLD]), {signal.SIGCHLD})

    def test_the_command_gets_the_dispositions_rlock_got(self):
        # nohup(1) and `cmd &` ignore HUP and INT: still so for the command. rlock ignores
        # SIGPIPE for itself; not for the command.
        self.assertEqual(self.run_with_ignored([signal.SIGHUP, signal.SIGINT]),
                         {signal.SIGHUP, signal.SIGINT})
        self.assertEqual(self.run_with_ignored([]), set())

if __name__ == "__main__":
    unittest.main()
