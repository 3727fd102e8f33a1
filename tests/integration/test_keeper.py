"""acquire --while-pid: flock's `exec 9>f; flock 9` for a fleet. A detached keeper renews the
lock while a script lives, gives it back when the script exits, and stops the script if the
lock is lost."""
import json
import os
import signal
import subprocess
import time
import unittest

from harness import RLOCK, RedisTestCase, pid_alive, processes_left, wait_until

SCRIPT = r"""
trap 'echo TERM >> "$DIR/signals"; "$RLOCK" status lock:deploy > "$DIR/at-term"; exit 3' TERM
tok=$("$RLOCK" acquire --ttl "${TTL:-1s}" $EXTRA --while-pid $$ lock:deploy) || exit 75
echo "$tok" > "$DIR/token.tmp" && mv "$DIR/token.tmp" "$DIR/token"
case "$1" in
  release) "$RLOCK" release --token "$tok" lock:deploy; echo "released $?" > "$DIR/released"
           sleep 1.5 ;;
  wait)    while [ ! -e "$DIR/go" ]; do sleep 0.05; done ;;
  child)   sleep 30 & echo $! > "$DIR/child"; wait $! ;;
  leftover) (sleep 1.5; echo > "$DIR/leftover-done") & exit 0 ;;
  stubborn) trap 'echo TERM >> "$DIR/signals"' TERM; echo > "$DIR/stubborn"
            while :; do sleep 0.05; done ;;
esac
echo done > "$DIR/done"
"""


class WhilePid(RedisTestCase):
    def script(self, *args, ttl="1s", extra=""):
        env = dict(os.environ, RLOCK=RLOCK, DIR=self.tmp, TTL=ttl, EXTRA=extra,
                   RLOCK_REDIS_URL=self.server.url)
        p = subprocess.Popen(["bash", "-c", SCRIPT, "script", *args], env=env,
                             start_new_session=True)
        self.procs.append(p)
        token = self.wait_file("token").strip()
        return p, token

    def keepers(self):
        return [pid for pid, cmd in processes_left().items() if cmd.startswith(RLOCK + " acquire")]

    def test_the_lock_is_held_past_several_ttls_and_given_back_at_the_exit(self):
        p, token = self.script("wait")
        value = self.server.cmd("GET", "lock:deploy")
        self.assertIn(f"pid={p.pid} ", value)  # the script holds it, not the keeper
        status = self.run_rlock(["status", "lock:deploy"]).stdout
        self.assertIn(f"pid {p.pid} (bash)", status)
        self.assertEqual(len(self.keepers()), 1)
        started = time.monotonic()
        # Renewed: still ours after 3.5 ttls, its expiry refreshed.
        while time.monotonic() - started < 3.5:
            v = self.server.cmd("GET", "lock:deploy")
            self.assertIsNotNone(v, "the lock expired while the script ran")
            self.assertTrue(v.startswith(f"rlock/1 {token} "), v)
            time.sleep(0.1)  # sampling the key, not synchronisation
        open(self.path("go"), "w").close()
        self.assertEqual(p.wait(timeout=10), 0)
        exited = time.monotonic()
        wait_until(lambda: self.server.cmd("EXISTS", "lock:deploy") == 0, 5, "the release")
        latency = time.monotonic() - exited
        print(f"\n  released {latency * 1000:.1f} ms after the script exited")
        self.assertLess(latency, 0.5, "released long after the script exited")
        wait_until(lambda: not self.keepers(), 5, "the keeper to exit")
        self.assertFalse(os.path.exists(self.path("signals")))

    def test_the_scripts_own_release_ends_the_keeper_quietly(self):
        p, token = self.script("release", ttl="1s")
        self.assertEqual(self.wait_file("released"), "released 0\n")
        wait_until(lambda: not self.keepers(), 5, "the keeper to exit")
        self.assertEqual(p.wait(timeout=10), 0)  # not signalled: it ran to its end
        self.assertFalse(os.path.exists(self.path("signals")))
        self.assert_no_lock("lock:deploy")

    def test_a_stolen_lock_signals_the_script(self):
        p, token = self.script("wait")
        self.server.cmd("SET", "lock:deploy", "someone-else", "PX", 60000)
        self.assertEqual(p.wait(timeout=10), 3)
        self.assertEqual(open(self.path("signals")).read(), "TERM\n")
        wait_until(lambda: not self.keepers(), 5, "the keeper to exit")
        self.assertEqual(self.server.cmd("GET", "lock:deploy"), "someone-else")

    def test_the_scripts_commands_are_stopped_with_it(self):
        # The script leads its process group (as under a shell, cron or systemd): what it
        # started gets the signal too, not only the script.
        p, token = self.script("child")
        child = int(self.wait_file("child"))
        self.server.cmd("SET", "lock:deploy", "someone-else", "PX", 60000)
        self.assertEqual(p.wait(timeout=10), 3)
        wait_until(lambda: not pid_alive(child), 10, "the script's command to be stopped")
        wait_until(lambda: not self.keepers(), 5, "the keeper to exit")

    def test_the_lock_is_held_until_the_scripts_leftovers_end(self):
        p, token = self.script("leftover")
        self.assertEqual(p.wait(timeout=10), 0)
        time.sleep(0.5)  # the script is gone; what it left running still holds the lock
        self.assertTrue(self.server.cmd("GET", "lock:deploy").startswith(f"rlock/1 {token} "))
        self.wait_file("leftover-done")
        wait_until(lambda: self.server.cmd("EXISTS", "lock:deploy") == 0, 5, "the release")
        wait_until(lambda: not self.keepers(), 5, "the keeper to exit")

    def test_a_stopped_keeper_keeps_the_lock_until_the_script_is_gone(self):
        p, token = self.script("wait")
        [keeper] = self.keepers()
        os.kill(keeper, signal.SIGTERM)
        self.assertEqual(p.wait(timeout=10), 3)
        with open(self.path("at-term")) as f:
            self.assertIn("held", f.read())  # still ours in the trap
        wait_until(lambda: self.server.cmd("EXISTS", "lock:deploy") == 0, 5, "the release")

    def test_a_stopped_keeper_under_on_lost_ignore_leaves_the_script_alone(self):
        p, token = self.script("wait", ttl="3s", extra="--on-lost ignore")
        [keeper] = self.keepers()
        os.kill(keeper, signal.SIGTERM)
        wait_until(lambda: not self.keepers(), 5, "the keeper to exit")
        # Neither given back (a renewal is at most 1s old) nor renewed: left to expire.
        self.assertGreater(self.server.cmd("PTTL", "lock:deploy"), 0)
        wait_until(lambda: self.server.cmd("EXISTS", "lock:deploy") == 0, 10, "the expiry")
        self.assertIsNone(p.poll())
        self.assertFalse(os.path.exists(self.path("signals")))
        open(self.path("go"), "w").close()
        self.assertEqual(p.wait(timeout=10), 0)

    def test_a_stop_kills_a_script_that_ignores_it_at_the_kill_after_asked_not_the_ttl(self):
        # The one rule for a stop's KILL (man rlock, stop), as for rlock run's command: the
        # whole --kill-after asked, here three ttls, with the lock renewed meanwhile.
        p, token = self.script("stubborn", ttl="1s")
        self.wait_file("stubborn")  # its trap is set
        stop = self.start(["stop", "lock:deploy", "--kill-after", "3s"])
        wait_until(lambda: os.path.exists(self.path("signals")), 5, "TERM to the script")
        termed = time.monotonic()
        while True:
            value = self.server.cmd("GET", "lock:deploy")
            if p.poll() is not None:
                break
            # The script ran after the read: the lock was still its own then.
            self.assertIsNotNone(value, "the lock expired while the script was stopping")
            self.assertTrue(value.startswith(f"rlock/1 {token} "), value)
            self.assertLess(time.monotonic() - termed, 15, "the script was never killed")
            time.sleep(0.05)  # sampling the key, not synchronisation
        killed = time.monotonic() - termed
        print(f"\n  killed {killed:.2f}s after its TERM (--kill-after 3s, ttl 1s)")
        self.assertEqual(p.returncode, -signal.SIGKILL)
        self.assertGreater(killed, 2.5, "killed before the --kill-after asked")
        self.assertLess(killed, 8)
        out, err = stop.communicate(timeout=30)
        self.assertEqual(stop.returncode, 0, err)
        self.assertIn("stopped", out)
        self.assert_no_lock("lock:deploy")
        wait_until(lambda: not self.keepers(), 5, "the keeper to exit")

    def test_a_release_of_another_key_leaves_the_keeper_alone(self):
        p, token = self.script("wait")
        r = self.run_rlock(["release", "--token", token, "lock:typo"])
        self.assertEqual(r.returncode, 1, r.stderr)
        time.sleep(1.5)  # renewals go on: the lock (ttl 1s) must still be ours
        self.assertTrue(self.server.cmd("GET", "lock:deploy").startswith(f"rlock/1 {token} "))
        self.assertEqual(len(self.keepers()), 1)
        open(self.path("go"), "w").close()
        self.assertEqual(p.wait(timeout=10), 0)

    def test_on_lost_ignore_only_stops_renewing(self):
        p, token = self.script("wait", extra="--on-lost ignore")
        self.server.cmd("SET", "lock:deploy", "someone-else", "PX", 60000)
        wait_until(lambda: self.server.cmd("PTTL", "lock:deploy") < 59000, 5, "a renewal")
        time.sleep(0.7)  # a renewal that finds it not ours: the script must not hear of it
        self.assertIsNone(p.poll())
        open(self.path("go"), "w").close()
        self.assertEqual(p.wait(timeout=10), 0)
        self.assertFalse(os.path.exists(self.path("signals")))

    def test_a_killed_script_frees_the_lock_at_once(self):
        p, token = self.script("wait", ttl="30s")
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        killed = time.monotonic()
        wait_until(lambda: self.server.cmd("EXISTS", "lock:deploy") == 0, 5, "the release")
        self.assertLess(time.monotonic() - killed, 2, "not released until the ttl")
        wait_until(lambda: not self.keepers(), 5, "the keeper to exit")
        self.assertEqual(sorted(self.server.cmd("KEYS", "*")),
                         ["{lock:deploy}:rlock:ended", "{lock:deploy}:rlock:fence"])

    def test_a_killed_leader_whose_group_runs_on_is_not_called_gone(self):
        # `setsid ./deploy.sh`, kill -9ed while its `sleep` runs: the keeper rightly holds the
        # lock for the group, so status and inspect must not send the operator waiting for an
        # expiry that never comes.
        p, token = self.script("child", ttl="1s")
        child = int(self.wait_file("child"))
        self.assertIn(" group=1", self.server.cmd("GET", "lock:deploy"))
        inspect = self.run_rlock(["inspect", "lock:deploy"]).stdout
        self.assertIn("holder alive   yes, held for its process group", inspect)
        os.kill(p.pid, signal.SIGKILL)  # the leader alone
        p.wait(timeout=10)
        wait_until(lambda: not pid_alive(p.pid), 5, "the script to be gone")
        self.assertTrue(pid_alive(child))
        status = self.run_rlock(["status", "lock:deploy"])
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertNotIn("holder process gone", status.stdout)
        self.assertNotIn("expires in", status.stdout)
        self.assertIn(f"pid {p.pid} (bash)", status.stdout)
        self.assertIn("pid gone, its process group still runs: its keeper renews the lock",
                      status.stdout)
        inspect = self.run_rlock(["inspect", "lock:deploy"]).stdout
        self.assertNotIn("the process is gone", inspect)
        self.assertIn(f"holder alive   yes, its process group: pid {p.pid} is gone, the group "
                      "still runs", inspect)
        doc = json.loads(self.run_rlock(["inspect", "--json", "lock:deploy"]).stdout)
        self.assertIs(doc["holder_alive"], True)
        self.assertEqual(doc["holder_liveness"], "group_running")
        busy = self.run_rlock(["acquire", "lock:deploy"])
        self.assertEqual(busy.returncode, 75, busy.stderr)
        self.assertIn("its process group still runs", busy.stderr)
        self.assertNotIn("holder process gone", busy.stderr)
        # The group ends: its keeper gives the lock back, and status says it is free.
        os.killpg(p.pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(child), 5, "the group to end")
        wait_until(lambda: self.server.cmd("EXISTS", "lock:deploy") == 0, 5, "the release")
        status = self.run_rlock(["status", "lock:deploy"])
        self.assertEqual((status.returncode, status.stdout), (1, "lock:deploy  free\n"))
        wait_until(lambda: not self.keepers(), 5, "the keeper to exit")

    def test_a_pid_that_leads_no_group_holds_the_lock_alone(self):
        sleeper = subprocess.Popen(["sleep", "30"])  # in this test's group, which it does not lead
        self.addCleanup(lambda: (sleeper.kill(), sleeper.wait()))
        r = self.run_rlock(["acquire", "--while-pid", str(sleeper.pid), "lock:alone"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(" group=", self.server.cmd("GET", "lock:alone"))
        self.assertIn("holder alive   yes\n", self.run_rlock(["inspect", "lock:alone"]).stdout)
        sleeper.kill()
        sleeper.wait()
        wait_until(lambda: self.server.cmd("EXISTS", "lock:alone") == 0, 5, "the release")

    def test_the_keeper_keeps_none_of_the_scripts_descriptors(self):
        # A script that holds a kernel flock on fd 9 (flock's own idiom) must not leave it
        # held by the keeper after it exits.
        probe = self.path("probe")
        env = dict(os.environ, RLOCK_REDIS_URL=self.server.url)
        sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
        self.addCleanup(lambda: (sleeper.kill(), sleeper.wait()))
        r = subprocess.run(["bash", "-c", f'exec 9>"{probe}"; flock 9; '
                            f'"{RLOCK}" acquire --while-pid {sleeper.pid} lock:fd'],
                           env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        free = subprocess.run(["flock", "-n", probe, "true"])
        self.assertEqual(free.returncode, 0, "the keeper still holds the script's flock")
        sleeper.kill()
        sleeper.wait()
        wait_until(lambda: self.server.cmd("EXISTS", "lock:fd") == 0, 5, "the release")

    def test_a_pid_that_does_not_exist_is_a_usage_error(self):
        r = self.run_rlock(["acquire", "--while-pid", "4194000", "lock:x"])
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertIn("no such process", r.stderr)
        self.assertEqual(self.server.cmd("DBSIZE"), 0)


if __name__ == "__main__":
    unittest.main()
