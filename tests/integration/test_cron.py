"""The README's cron line, as a newcomer pastes it: the line of its "The cron line" section goes
into /etc/cron.d of a real cron daemon three times, as three hosts (RLOCK_HOSTNAME), fired
every minute instead of at 03:00. Across two minutes of firings the job runs once, on one host,
and every line exits 0 (another host having it, or having done it today, is success with -E 0).

Changed from the README's line: its times; its user (root: the job's user is another test's
matter); the paths of rlock and of the job; a guard before it (`test -d DIR &&`: a line a
killed test left behind does nothing) and a recorder of its exit status after it. It writes
/etc/cron.d/rlock-newcomer-test and starts cron itself (Debian's cron, or cronie's crond) when
no cron daemon runs: CI is root on a scratch machine (packaging/setup-debian.sh installs cron).
Not root (a developer's machine): skipped; root without cron: a failure."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

from harness import RLOCK, RedisServer, run_rlock, wait_until
from test_docs import read

CRON_FILE = "/etc/cron.d/rlock-newcomer-test"
HOSTS = ["web-1", "web-2", "web-3"]


def readme_cron_line():
    """The first line of the README's first ```cron block: times, user, command."""
    block = re.search(r"```cron\n(.*?)\n```", read("README.md"), re.S).group(1)
    fields = block.splitlines()[0].split(None, 6)
    return fields[:5], fields[5], fields[6]


def lines_of(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


class ReadmeCronLine(unittest.TestCase):
    def setUp(self):
        # Debian's cron stays in the foreground with -f, cronie's crond with -n.
        daemon = next(([path, flag] for name, flag in (("cron", "-f"), ("crond", "-n"))
                       for path in [shutil.which(name) or f"/usr/sbin/{name}"]
                       if os.path.exists(path)), None)
        if os.geteuid() != 0:
            self.skipTest("writes /etc/cron.d: run as root (CI is)")
        self.assertIsNotNone(daemon, "no cron daemon: packaging/setup-debian.sh installs cron")
        for stale in (CRON_FILE, CRON_FILE + ".new"):  # a killed run's
            if os.path.exists(stale):
                os.unlink(stale)
        self.redis = RedisServer()
        self.addCleanup(self.redis.stop)
        self.dir = tempfile.mkdtemp(prefix="rlock-cron-")
        os.chmod(self.dir, 0o755)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.daemon = None
        if subprocess.run(["pgrep", "-x", "cron|crond"], capture_output=True).returncode != 0:
            self.daemon = subprocess.Popen(daemon, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.addCleanup(self.stop_daemon)

    def stop_daemon(self):
        self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon.wait(10)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
        self.daemon.stderr.close()

    def test_the_job_runs_once_across_three_hosts(self):
        times, user, command = readme_cron_line()
        self.assertEqual(times, ["0", "3", "*", "*", "*"], "the README's line changed its times")
        self.assertTrue(command.startswith("/usr/bin/rlock run "), command)
        key = re.search(r" (lock:\S+) -- ", command).group(1)
        job_path = re.search(r" -- (\S+)$", command).group(1)

        ran, exits = os.path.join(self.dir, "ran"), os.path.join(self.dir, "exits")
        job = os.path.join(self.dir, "report.sh")
        with open(job, "w") as f:
            f.write(f'#!/bin/sh\necho "$(date +%s) $RLOCK_HOSTNAME $RLOCK_FENCE" >> {ran}\n')
        os.chmod(job, 0o755)
        pasted = command.replace("/usr/bin/rlock", RLOCK, 1).replace(job_path, job)

        # --once-per day is a UTC day by the Redis server's clock: firings on both sides of
        # midnight would rightly run the job twice. The two minutes start clear of it.
        wait_until(lambda: int(self.redis.cmd("TIME")[0]) % 86400 < 86400 - 150, timeout=160,
                   interval=1, what="a time clear of midnight UTC")

        # What a host's /etc/cron.d holds, the three hosts in one file: cron's own environment
        # lines name Redis (as the config file would) and the host.
        text = ['MAILTO=""', f"RLOCK_REDIS_URL={self.redis.url}"]
        for host in HOSTS:
            text += [f"RLOCK_HOSTNAME={host}",
                     f'* * * * *  root  test -d {self.dir} && {{ {pasted}; '
                     f'echo "{host} $?" >> {exits}; }}']
        with open(CRON_FILE + ".new", "w") as f:
            f.write("\n".join(text) + "\n")
        os.chmod(CRON_FILE + ".new", 0o644)
        os.rename(CRON_FILE + ".new", CRON_FILE)
        self.addCleanup(os.unlink, CRON_FILE)

        # Two minutes of firings: cron reads the file at its next minute, fires the three lines,
        # and again a minute later (a late host's cron, once the first run has ended).
        try:
            wait_until(lambda: len(lines_of(exits)) >= 6, timeout=200, interval=1,
                       what="three lines fired twice")
        except AssertionError as e:
            raise AssertionError(f"{e}: {self.why_not(exits)}") from None
        self.assertEqual(sorted(lines_of(exits)), sorted(f"{h} 0" for h in HOSTS * 2))
        runs = lines_of(ran)
        self.assertEqual(len(runs), 1, f"the job ran {len(runs)} times: {runs}")
        host = runs[0].split()[1]
        self.assertIn(host, HOSTS)
        # The record names the host that ran it, as `rlock history` shows an operator.
        history = run_rlock(["history", key, "--json"], self.redis)
        self.assertEqual(history.returncode, 0, history.stderr)
        self.assertIn(f'"host":"{host}"', history.stdout.replace(" ", ""))

    def why_not(self, exits):
        daemon = ""
        if self.daemon and self.daemon.poll() is not None:
            daemon = f"; cron exited {self.daemon.returncode}: {self.daemon.stderr.read()}"
        return f"exits recorded: {lines_of(exits)}{daemon}"
