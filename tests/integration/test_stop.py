"""rlock stop: an operator on one host stops the job another host runs, within a second, and
the record says who and why (man rlock, "stop"). Three hosts simulated with RLOCK_HOSTNAME."""
import json
import os
import pwd
import signal
import subprocess
import time
import unittest

from harness import RLOCK, RedisTestCase, free_port, rlock_env, wait_until

KEY = "lock:job"
ME = pwd.getpwuid(os.geteuid()).pw_name

# A job that records the signals it gets and exits 3 on TERM, as a careful script does.
TRAPPING = ('trap \'echo TERM >> "$T/signals"; exit 3\' TERM; '
            'trap \'echo INT >> "$T/signals"; exit 4\' INT; '
            'echo $$ > "$T/started"; while :; do sleep 0.05; done')
# One that takes half a second to end after its TERM: every stop of a race is made while it
# holds the lock, however slowly a loaded machine starts the askers (a later one finds it free).
LINGERING = TRAPPING.replace("exit 3", "sleep 0.5; exit 3")


class Stop(RedisTestCase):

    def host(self, name, **extra):
        return rlock_env(self.server, RLOCK_HOSTNAME=name, T=self.tmp, **extra)

    def start_job(self, host="web-1", args=(), started="started", text=TRAPPING, **kw):
        proc = self.start(["run", *args, KEY, "-c", text.replace("/started", "/" + started)],
                          env=self.host(host), **kw)
        self.wait_file(started)
        return proc

    def signals(self):
        try:
            with open(self.path("signals")) as f:
                return f.read().split()
        except FileNotFoundError:
            return []

    def history(self):
        r = self.run_rlock(["history", "--json", KEY])
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["runs"]

    def test_a_job_held_on_another_host_is_stopped_within_a_second_and_recorded(self):
        holder = self.start_job()
        watch = self.start(["watch", "--json", KEY], env=self.host("web-3"))
        wait_until(lambda: json.loads(watch.stdout.readline())["event"] == "state", 10, "watch")
        asked = time.monotonic()
        stop = self.start(["stop", KEY, "--reason", "db maintenance"], env=self.host("ops-1"))
        # Its rlock renews every 10s (ttl 30s): a stop acted on at a renewal comes far later.
        wait_until(lambda: self.signals(), 3.0, "TERM to the job")
        self.assertLess(time.monotonic() - asked, 3.0)
        self.assertEqual(self.signals(), ["TERM"])
        out, err = stop.communicate(timeout=30)
        self.assertEqual(stop.returncode, 0, err)
        self.assertIn("stopped web-1 pid", out)
        self.assertIn("given back", out)
        holder.wait(timeout=10)
        said = holder.stderr.read()
        self.assertEqual(holder.returncode, 80, said)
        self.assertIn(f"stop requested by {ME}@ops-1: db maintenance; sending SIGTERM", said)
        self.assert_no_lock(KEY)
        # Nothing is left of the request.
        self.assertEqual(self.server.cmd("KEYS", "*stop-*"), [])
        run = self.history()[0]
        self.assertEqual((run["end"], run["exit_status"], run["by"], run["reason"]),
                         ("stopped", 80, f"{ME}@ops-1", "db maintenance"))
        r = self.run_rlock(["history", KEY])
        self.assertIn(f"stopped by {ME}@ops-1: db maintenance (80)", r.stdout)

        def released():
            line = watch.stdout.readline()
            event = json.loads(line)
            return event if event["event"] == "released" else None
        event = wait_until(released, 10, "watch's released event")
        self.assertEqual((event["run"]["end"], event["run"]["exit_status"], event["run"]["by"]),
                         ("stopped", 80, f"{ME}@ops-1"))

    def race_stops(self, hosts):
        """Runs `rlock stop KEY --reason "from HOST"` on each of HOSTS at the same moment: each
        waits at a gate (a FIFO) until all do, and all are let through by one write. Returns,
        for each, (host, exit status, stdout, stderr, seconds from the gate's opening)."""
        gate = self.path("gate")
        if not os.path.exists(gate):
            os.mkfifo(gate)
        # Held open for writing, so that no shell's open blocks and none misses its line.
        fd = os.open(gate, os.O_RDWR)
        self.addCleanup(os.close, fd)
        procs = []
        for host in hosts:
            p = subprocess.Popen(["sh", "-c", 'read _ < "$T/gate" && exec "$0" "$@"', RLOCK,
                                  "stop", KEY, "--reason", "from " + host],
                                 env=self.host(host), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
            self.procs.append(p)
            procs.append(p)

        def at_gate(pid):
            try:
                return os.readlink(f"/proc/{pid}/fd/0") == gate
            except FileNotFoundError:
                return False
        wait_until(lambda: all(at_gate(p.pid) for p in procs), 10, "the stops at the gate")
        os.write(fd, b"\n" * len(procs))
        opened = time.monotonic()
        took = {}

        def all_ended():
            for i, p in enumerate(procs):
                if i not in took and p.poll() is not None:
                    took[i] = time.monotonic() - opened
            return len(took) == len(procs)
        wait_until(all_ended, 30, "every stop to end", interval=0.001)
        return [(host, p.returncode, p.stdout.read(), p.stderr.read(), took[i])
                for i, (host, p) in enumerate(zip(hosts, procs))]

    def assert_told_who_stopped(self, results, holder, run):
        """Each of RESULTS (race_stops) ended at once with 0: the asker whose request HOLDER
        took says it stopped it; every other, that it was stopped by that asker, and why."""
        takers = 0
        for host, status, out, err, took in results:
            self.assertEqual(status, 0, (host, out, err))
            # The holder answers every asker at once (1s required; CI machines are slow).
            self.assertLess(took, 3.0, (host, out, err))
            line = [l for l in out.splitlines() if f" {holder} pid " in l]
            self.assertEqual(len(line), 1, (host, out))
            if run["by"] == f"{ME}@{host}":
                takers += 1
                self.assertTrue(line[0].startswith(f"{KEY}: stopped {holder} pid "), line)
            else:
                self.assertIn("was already stopping", line[0])
                self.assertTrue(line[0].endswith(f"; stopped by {run['by']}: {run['reason']}"),
                                line)
            self.assertIn("the lock was given back after", line[0])
        self.assertEqual(takers, 1, results)

    def test_stops_asked_at_the_same_moment_are_each_told_who_stopped_the_run(self):
        # Repeated, so that a lost race is likely; in some rounds the stops come before the
        # holder listens (half a second into its run) and wait in its list.
        for n, (askers, listening) in enumerate(((2, True), (3, True), (2, False), (3, True),
                                                 (2, True), (3, False)), 1):
            holder = self.start_job(started=f"started-{n}", text=LINGERING)
            if listening:
                wait_until(lambda: "cmd=blpop" in self.server.cmd("CLIENT", "LIST"), 5,
                           "the holder's listener")
            results = self.race_stops([f"ops-{i}" for i in range(1, askers + 1)])
            self.assertEqual(holder.wait(timeout=10), 80)
            runs = self.history()
            self.assertEqual(len(runs), n, runs)  # one run, stopped once
            self.assertEqual(runs[0]["end"], "stopped")
            self.assertIn(runs[0]["reason"], [f"from ops-{i}" for i in range(1, askers + 1)])
            self.assertEqual(runs[0]["by"], f"{ME}@{runs[0]['reason'][5:]}")
            self.assert_told_who_stopped(results, "web-1", runs[0])
            self.assert_no_lock(KEY)
            self.assertEqual(self.server.cmd("KEYS", "*stop-*"), [])

    def test_stops_asked_at_the_same_moment_reach_every_holder_of_a_semaphore(self):
        holders = {h: self.start_job(h, ["--limit", "2"], "started-" + h, LINGERING)
                   for h in ("web-1", "web-2")}
        wait_until(lambda: self.server.cmd("CLIENT", "LIST").count("cmd=blpop") == 2, 5,
                   "the holders' listeners")
        results = self.race_stops(["ops-1", "ops-2"])
        for h, proc in holders.items():
            self.assertEqual(proc.wait(timeout=10), 80)
        runs = {run["holder"]["host"]: run for run in self.history()}
        self.assertEqual(sorted(runs), ["web-1", "web-2"])
        for h in holders:
            self.assert_told_who_stopped(results, h, runs[h])
        self.assertEqual(self.server.cmd("ZCARD", "{lock:job}:rlock:sem"), 0)

    def test_a_stop_while_the_holder_is_stopping_is_told_who_stopped_it(self):
        # The job takes 2s to end after its TERM: time enough to ask again.
        holder = self.start_job(text=TRAPPING.replace("exit 3", "sleep 2; exit 3"))
        first = self.start(["stop", KEY, "--reason", "first"], env=self.host("ops-1"))
        wait_until(lambda: self.signals(), 3.0, "TERM to the job")
        asked = time.monotonic()
        r = self.run_rlock(["stop", KEY, "--reason", "second"], env=self.host("ops-2"))
        self.assertLess(time.monotonic() - asked, 3.0)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("was already stopping", r.stdout)
        self.assertTrue(r.stdout.endswith(f"; stopped by {ME}@ops-1: first\n"), r.stdout)
        out, err = first.communicate(timeout=10)
        self.assertEqual(first.returncode, 0, err)
        self.assertIn("stopped web-1 pid", out)
        self.assertEqual(holder.wait(timeout=10), 80)
        self.assertEqual(self.signals(), ["TERM"])
        run = self.history()[0]
        self.assertEqual((run["by"], run["reason"]), (f"{ME}@ops-1", "first"))
        # Asked once it is over: nothing to stop.
        r = self.run_rlock(["stop", KEY], env=self.host("ops-3"))
        self.assertEqual((r.returncode, r.stdout), (1, KEY + ": free; nothing to stop\n"))

    def test_a_stop_that_signal_and_kill_after_override_reaches_every_holder(self):
        # A semaphore's two holders on two hosts: both asked, each with INT instead of its TERM.
        first = self.start_job("web-1", ["--limit", "2"], "started-1")
        second = self.start_job("web-2", ["--limit", "2"], "started-2")
        r = self.run_rlock(["stop", KEY, "--signal", "INT", "--kill-after", "2s"],
                           env=self.host("ops-1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("stopped web-"), 2, r.stdout)
        for proc in (first, second):
            proc.wait(timeout=10)
            self.assertEqual(proc.returncode, 80)
        self.assertEqual(self.signals(), ["INT", "INT"])
        self.assertEqual(self.server.cmd("ZCARD", "{lock:job}:rlock:sem"), 0)

    def test_a_stopped_once_per_run_uses_up_its_period_and_says_how_to_run_again(self):
        # rlock stop --help says so; the next cron run's line names rlock reset-period, which
        # lets it run.
        self.assertIn("reset-period", self.run_rlock(["stop", "--help"]).stdout)
        # A period of ten years (from 2020): no test run crosses into the next.
        holder = self.start_job(args=["--once-per", "3650d"])
        r = self.run_rlock(["stop", KEY], env=self.host("ops-1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(holder.wait(timeout=10), 80)
        r = self.run_rlock(["run", "--once-per", "3650d", KEY, "--", "true"],
                           env=self.host("web-2"))
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertIn("already run this period", r.stderr)
        self.assertIn("stopped", r.stderr)
        self.assertIn("rlock reset-period would let it run again", r.stderr)
        r = self.run_rlock(["reset-period", KEY, "--once-per", "3650d"], env=self.host("ops-1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_rlock(["run", "--once-per", "3650d", KEY, "--", "true"],
                           env=self.host("web-2"))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_job_that_ignores_the_signal_is_killed_after_the_kill_after(self):
        holder = self.start_job(text='trap "" TERM; echo $$ > "$T/started"; '
                                     'while :; do sleep 0.05; done')
        began = time.monotonic()
        r = self.run_rlock(["stop", KEY, "--kill-after", "1s"], env=self.host("ops-1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        holder.wait(timeout=10)
        self.assertEqual(holder.returncode, 80)
        self.assertIn("sending KILL", holder.stderr.read())
        self.assertGreaterEqual(time.monotonic() - began, 1.0)
        self.assert_no_lock(KEY)

    def test_a_holder_that_does_not_answer_is_named_and_the_request_withdrawn(self):
        said = open(self.path("said"), "w+")
        self.addCleanup(said.close)
        holder = self.start_job(stderr=said)
        # The holder listens from half a second into its run: its BLPOP is on the server, which
        # hands it the request even while rlock is frozen.
        wait_until(lambda: "cmd=blpop" in self.server.cmd("CLIENT", "LIST"), 5,
                   "the holder's listener")
        os.kill(holder.pid, signal.SIGSTOP)  # rlock frozen: its command runs on
        try:
            r = self.run_rlock(["stop", KEY, "--reason", "x"], env=self.host("ops-1"))
            self.assertEqual(r.returncode, 75, r.stderr)
            self.assertIn("did not answer within 5s", r.stderr)
            self.assertIn("rlock release --force " + KEY, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
            # Withdrawn: the holder, continued later, must not act on a request given up on.
            self.assertEqual(self.server.cmd("KEYS", "*stop-*"), [])
        finally:
            os.kill(holder.pid, signal.SIGCONT)
        # Continued, it finds the request it was handed given up on, and runs on.
        def said_so():
            with open(self.path("said")) as f:
                return "its asker gave up" in f.read()
        wait_until(said_so, 10, "the holder to find the request given up on")
        self.assertIsNotNone(self.server.cmd("GET", KEY))
        self.assertIsNone(holder.poll())
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=10)
        self.assertEqual(holder.returncode, 3)  # the job's own: TERM forwarded, not a stop
        self.assertEqual(self.history()[0]["end"], "exited")

    def requests(self, token):
        return self.server.cmd("LRANGE", "{lock:job}:rlock:stop-" + token, 0, -1)

    def test_ctrl_c_takes_back_a_request_not_taken_yet(self):
        # A lock of rlock acquire without --while-pid: nothing listens for the request.
        token = self.run_rlock(["acquire", KEY], env=self.host("web-1")).stdout.strip()
        stop = self.start(["stop", KEY, "--reason", "mine"], env=self.host("ops-1"))
        wait_until(lambda: len(self.requests(token)) == 1, 5, "the request")
        # Another operator's, asked meanwhile, stays: only its asker may take it back.
        other = self.start(["stop", KEY, "--reason", "theirs"], env=self.host("ops-2"))
        wait_until(lambda: len(self.requests(token)) == 2, 5, "the other request")
        stop.send_signal(signal.SIGINT)
        self.assertEqual(stop.wait(timeout=10), 130)
        left = self.requests(token)
        self.assertEqual(len(left), 1, left)
        self.assertIn(f"by={ME}@ops-2 ", left[0])
        other.send_signal(signal.SIGINT)
        self.assertEqual(other.wait(timeout=10), 130)
        self.assertEqual(self.server.cmd("KEYS", "*:rlock:stop-*"), [])
        self.assertEqual(self.run_rlock(["release", KEY, "--token", token]).returncode, 0)

    def test_a_holder_that_gives_the_lock_back_before_it_answers_ends_the_wait(self):
        # Nothing listens (acquire without --while-pid), and the lock is given back meanwhile:
        # its run ended as it was asked. The asker is not left to call it away 5s on.
        token = self.run_rlock(["acquire", KEY], env=self.host("web-1")).stdout.strip()
        stop = self.start(["stop", KEY], env=self.host("ops-1"))
        wait_until(lambda: self.requests(token), 5, "the request")
        released = time.monotonic()
        self.assertEqual(self.run_rlock(["release", KEY, "--token", token]).returncode, 0)
        out, err = stop.communicate(timeout=10)
        self.assertLess(time.monotonic() - released, 3.0)
        self.assertEqual(stop.returncode, 0, err)
        self.assertRegex(out, f"^{KEY}: web-1 pid .* gave the lock back after .*, before it took "
                              "the request\n$")

    def test_a_script_that_holds_the_lock_with_acquire_while_pid_is_stopped(self):
        script = self.path("script.sh")
        with open(script, "w") as f:
            f.write(f"""#!/bin/sh
trap 'echo TERM >> "$T/signals"; exit 3' TERM
{RLOCK} acquire {KEY} --while-pid $$ > /dev/null || exit 9
echo $$ > "$T/started"
while :; do sleep 0.05; done
""")
        os.chmod(script, 0o755)
        proc = subprocess.Popen([script], env=self.host("web-2", PATH=os.environ["PATH"]),
                                start_new_session=True)
        self.procs.append(proc)
        self.wait_file("started")
        r = self.run_rlock(["stop", KEY, "--reason", "maintenance"], env=self.host("ops-1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("stopped web-2 pid", r.stdout)
        self.assertEqual(proc.wait(timeout=10), 3)
        self.assertEqual(self.signals(), ["TERM"])
        self.assert_no_lock(KEY)

    def test_a_forced_break_is_recorded_with_who_and_why(self):
        # release --force, for a holder that cannot be asked: its rlock learns at its next
        # renewal (ttl/3), stops the job as a loss (76), and its run says who broke it and why.
        holder = self.start_job(args=["--ttl", "3s"])
        watch = self.start(["watch", "--json", KEY], env=self.host("web-3"))
        wait_until(lambda: json.loads(watch.stdout.readline())["event"] == "state", 10, "watch")
        r = self.run_rlock(["release", KEY, "--force", "--reason", "hung on the db"],
                           env=self.host("ops-1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        # Before the holder's next renewal, status shows the tombstone "broken by ... (why)";
        # after it, the run the holder recorded, "last run: broken by ...: why". A slow build
        # can see either; both name who and why.
        r = self.run_rlock(["status", KEY])
        self.assertIn(f"broken by {ME}@ops-1", r.stdout)
        self.assertRegex(r.stdout, r"\(hung on the db\)|: hung on the db \(76\)")
        self.assertEqual(holder.wait(timeout=10), 76)
        # The break, recorded by release --force at once, and the broken run's end.
        ends = {e["end"]: e for e in self.history()}
        run, action = ends["broken"], ends["forced-release"]
        self.assertEqual((run["end"], run["exit_status"], run["by"], run["reason"]),
                         ("broken", 76, f"{ME}@ops-1", "hung on the db"))
        self.assertEqual((action["fence"], action["by"], action["reason"]),
                         (run["fence"], f"{ME}@ops-1", "hung on the db"))

        def broken():
            event = json.loads(watch.stdout.readline())
            return event if event["event"] == "broken" else None
        event = wait_until(broken, 10, "watch's broken event")
        self.assertEqual((event["broken"]["by"], event["broken"]["reason"]),
                         (f"{ME}@ops-1", "hung on the db"))

    def test_a_server_that_refuses_connections_is_unreachable_at_once(self):
        # A request is sent again through a failover (Sentinel, Cluster); one server that
        # refuses connections is not failing over: 69 at once, not after 10 s of tries.
        down = rlock_env(RLOCK_REDIS_URL=f"redis://127.0.0.1:{free_port()}")
        began = time.monotonic()
        r = subprocess.run([RLOCK, "stop", KEY], env=down, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("Connection refused", r.stderr)
        self.assertLess(time.monotonic() - began, 5, "stop tried again for seconds")

    def test_nothing_to_stop(self):
        r = self.run_rlock(["stop", KEY])
        self.assertEqual((r.returncode, r.stdout), (1, KEY + ": free; nothing to stop\n"))
        self.assertEqual(self.server.cmd("DBSIZE"), 0)
        # Another program's lock is not rlock's to stop.
        self.server.cmd("SET", "other", "someone else's", "PX", "30000")
        r = self.run_rlock(["stop", "other"])
        self.assertEqual(r.returncode, 69, r.stderr)
        self.assertIn("not an rlock lock", r.stderr)
        self.assertEqual(self.server.cmd("DBSIZE"), 1)
        # A holder of another token is not asked.
        holder = self.start_job()
        r = self.run_rlock(["stop", KEY, "--token", "0" * 32])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no holder with that token", r.stderr)
        self.assertEqual(self.server.cmd("KEYS", "*stop-*"), [])
        self.assertIsNone(holder.poll())
        holder.send_signal(signal.SIGTERM)
        holder.wait(timeout=10)
        self.assertEqual(holder.returncode, 3)

    def test_bad_input_changes_nothing(self):
        for args, what in ((["--signal", "NOPE"], "--signal"), (["--kill-after", "0"], "--kill-after"),
                           (["--token", "xyz"], "--token"), (["--reason", "x" * 501], "--reason"),
                           (["--within", "soon"], "--within"), (["--within", "0"], "--within"),
                           (["--kill-after", "3661d"], "too long")):
            r = self.run_rlock(["stop", KEY] + args)
            self.assertEqual(r.returncode, 64, (args, r.stderr))
            self.assertIn(what, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertEqual(self.server.cmd("DBSIZE"), 0)


if __name__ == "__main__":
    unittest.main()
