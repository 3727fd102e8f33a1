"""The fault suite: many `rlock run --wait` racers, faults injected on purpose, then the history
checked.

Every racer's command is tests/faults/section.cpp, which holds a kernel flock on a probe file
for as long as it is alive inside the lock: a racer that finds every probe slot taken has
caught an overlap as it happened, and logs it with the fence of the one in its way. The log
also records, on one monotonic clock, when each section entered and left.

After each scenario the history is checked:
  - at most one section inside at any moment (--limit N: at most N), except in the documented
    cases: a holder frozen past its ttl, and a lock deleted by hand (docs/DESIGN.md "Proven under
    faults"); there the newcomer's RLOCK_FENCE must be the greater;
  - every racer ran its section, or exited with a documented status that the fault explains;
  - no lock key and no waiting-room key left in Redis (fence counters and the run history are
    meant to stay), and
    no section process left alive.

Randomness is seeded: RLOCK_FAULT_SEED=N reruns a run; the seed is printed either way. A
summary of every scenario is printed and written to $RLOCK_BUILD_DIR/faults-report.txt.
"""
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (REDIS_SERVER, RLOCK, RedisClient, RedisServer, RespError, free_port,
                     guardian_of, pid_alive, rlock_env, wait_until)

SECTION = os.environ.get("RLOCK_FAULT_SECTION") or os.path.join(
    os.path.dirname(RLOCK), "tests", "rlock_fault_section")
SEED = int(os.environ.get("RLOCK_FAULT_SEED") or random.SystemRandom().randrange(2**32))
TTL_MS = 1000
CONCURRENCY = 6          # racers alive at once
SPAWN_GAP = 0.02         # at most one new racer per 20 ms (a Redis outage makes them exit fast)
WARM_UP = 0.8            # racing before the fault
RECOVERY = 1.2           # racing after the fault, which must see sections run again
DRAIN_TIMEOUT = 40       # for the last racers to finish

OK, UNAVAILABLE, LOST = 0, 69, 76
REPORT = []


class Racers:
    """Keeps CONCURRENCY racers going against one key, in a thread, until stop()."""

    def __init__(self, tmp, url, key, limit, rng):
        self.tmp, self.url, self.key, self.limit, self.rng = tmp, url, key, limit, rng
        self.log = os.path.join(tmp, "sections.log")
        self.probe = os.path.join(tmp, "probe")
        os.mkdir(self.probe)
        self.all = []  # [Popen, role, hold_ms]
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._pump, daemon=True)

    def spawn(self, hold_ms, role="racer"):
        args = [RLOCK, "run", "--wait", "60s", "--ttl", f"{TTL_MS}ms"]
        if self.limit > 1:
            args += ["--limit", str(self.limit)]
        args += [self.key, "--", SECTION, self.log, self.probe, str(self.limit), str(hold_ms)]
        with self.lock:
            err = open(os.path.join(self.tmp, f"racer-{len(self.all)}.err"), "w")
            p = subprocess.Popen(args, env=rlock_env(RLOCK_REDIS_URL=self.url),
                                 stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
            err.close()
            self.all.append([p, role, hold_ms])
        return p

    def _pump(self):
        while not self.stopping.is_set():
            with self.lock:
                live = sum(1 for p, role, _ in self.all if role == "racer" and p.poll() is None)
            if live < CONCURRENCY:
                self.spawn(self.rng.randint(10, 80))
            self.stopping.wait(SPAWN_GAP)

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.thread.join()
        deadline = time.monotonic() + DRAIN_TIMEOUT
        for p, _, _ in self.all:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        stuck = [p.pid for p, _, _ in self.all if p.poll() is None]
        for p, _, _ in self.all:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # it ended in between
                p.wait()
        return stuck

    def history(self):
        try:
            with open(self.log) as f:
                return [line.split() for line in f]
        except FileNotFoundError:
            return []

    def inside(self, rlock_pid):
        """The section pid of RLOCK_PID's command once it has entered, else None."""
        for e in self.history():
            if e[0] == "enter" and int(e[2]) == rlock_pid:
                return int(e[1])
        return None

    def entered_since(self, t_ns):
        return [e for e in self.history() if e[0] == "enter" and int(e[4]) >= t_ns]


def now_ns():
    return time.monotonic_ns()


def wait_dead(pid, timeout, what):
    """Polls until PID is gone; returns the monotonic time (ns) it was first seen gone."""
    wait_until(lambda: not pid_alive(pid), timeout, what, interval=0.002)
    return now_ns()


class NetnsRedis:
    """A redis-server in a network namespace of its own, reached over a veth pair, so that the
    link can be cut: packets are then dropped silently, as in a real partition."""

    def __init__(self):
        n = os.getpid() % 200 + 20
        self.ns, self.host_if, self.ns_if = f"rlk{os.getpid()}", f"rlkh{n}", f"rlkn{n}"
        self.ip = f"10.231.{n}.2"
        self.dir = tempfile.mkdtemp(prefix="rlock-netns-")
        self.port = free_port()
        self.proc = None
        ip = ["ip"]
        cmds = [ip + ["netns", "add", self.ns],
                ip + ["link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if],
                ip + ["link", "set", self.ns_if, "netns", self.ns],
                ip + ["addr", "add", f"10.231.{n}.1/24", "dev", self.host_if],
                ip + ["link", "set", self.host_if, "up"],
                self.in_ns(["ip", "addr", "add", f"{self.ip}/24", "dev", self.ns_if]),
                self.in_ns(["ip", "link", "set", self.ns_if, "up"]),
                self.in_ns(["ip", "link", "set", "lo", "up"])]
        try:
            for c in cmds:
                subprocess.run(c, check=True, capture_output=True)
            self.proc = subprocess.Popen(
                self.in_ns([REDIS_SERVER, "--bind", self.ip, "--port", str(self.port),
                            "--protected-mode", "no", "--save", "", "--appendonly", "no",
                            "--dir", self.dir, "--loglevel", "warning"]),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_until(self._pings, 10, "redis-server in the namespace")
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def available():
        """Why a namespace cannot be made here, or None."""
        if os.geteuid() != 0:
            return "not root"
        if not shutil.which("ip"):
            return "no ip(8) (iproute2)"
        probe = f"rlkprobe{os.getpid()}"
        r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
        if r.returncode != 0:
            return "ip netns add failed: " + r.stderr.strip()
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
        return None

    def in_ns(self, args):
        return ["ip", "netns", "exec", self.ns] + args

    @property
    def url(self):
        return f"redis://{self.ip}:{self.port}"

    def _pings(self):
        try:
            c = RedisClient(timeout=0.5, address=(self.ip, self.port))
            try:
                return c("PING") == "PONG"
            finally:
                c.close()
        except OSError:
            return False

    def cmd(self, *args):
        return RedisClient.once((self.ip, self.port), *args)

    def cut(self):
        subprocess.run(self.in_ns(["ip", "link", "set", self.ns_if, "down"]), check=True)

    def heal(self):
        subprocess.run(self.in_ns(["ip", "link", "set", self.ns_if, "up"]), check=True)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


class Scenario:
    """What one fault is allowed to cause, and what it did."""

    def __init__(self, name, limit=1, redis_wide=False, unavailable=False):
        self.name, self.limit = name, limit
        # Exit statuses any racer may have. A fault of the whole server may also take the lock
        # from other holders than the victim (--limit), hence LOST where it says redis_wide.
        self.allowed = {OK}
        self.victims = {}             # rlock pid -> allowed statuses of that racer
        self.documented = None        # the kind of overlap the fault may cause, if any
        self.documented_fences = set()
        self.faults = 0
        self.notes = []
        if redis_wide:
            self.allowed.add(LOST)
        if unavailable:  # a racer started while Redis could not answer: 69 at once
            self.allowed.add(UNAVAILABLE)


@unittest.skipIf(os.environ.get("RLOCK_SANITIZE") == "address",
                 "a long scenario: run in the plain build, and under TSan for the renewal thread")
class FaultSuite(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        print(f"\nfault suite seed {SEED} (rerun with RLOCK_FAULT_SEED={SEED})")
        cls.rng = random.Random(SEED)

    @classmethod
    def tearDownClass(cls):
        text = "\n".join(REPORT) + "\n"
        print("\n" + text)
        build = os.environ.get("RLOCK_BUILD_DIR")
        if build:
            with open(os.path.join(build, "faults-report.txt"), "w") as f:
                f.write(f"seed {SEED}\n" + text)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rlock-faults-")
        self.server = None

    def tearDown(self):
        if self.server:
            self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # The scenario runner --------------------------------------------------------------------

    def race(self, scenario, fault, server=None, url=None):
        """Racers race; FAULT(racers, scenario, server) injects; the history is checked."""
        self.server = server or RedisServer()
        key = f"fault:{scenario.name}"
        racers = Racers(self.tmp, url or self.server.url, key, scenario.limit,
                        random.Random(self.rng.randrange(2**32)))
        racers.start()
        try:
            time.sleep(WARM_UP)  # pacing: the racers run meanwhile; nothing waits on this
            fault(racers, scenario, self.server)
            fault_over = now_ns()
            wait_until(lambda: racers.entered_since(fault_over), 30,
                       "a section to run after the fault (recovery)")
            time.sleep(RECOVERY)  # pacing, as above
        finally:
            stuck = racers.stop()
        self.assertEqual(stuck, [], "racers still running long after the race ended")
        self.check(racers, scenario, key)

    def victim(self, racers, hold_ms=8000):
        """Starts a racer with a long section and waits until it is inside; returns
        (rlock Popen, section pid)."""
        p = racers.spawn(hold_ms, role="victim")
        section = wait_until(lambda: racers.inside(p.pid), 30, "the victim inside the lock")
        return p, section

    # The checks -------------------------------------------------------------------------------

    def lost_before_its_command_ran(self, i):
        """Whether racer I said it lost the lock it held: one that took the lock as the fault
        began may lose it before its command has logged its entry (a process start that a
        sanitizer and a loaded machine make slow), and rightly kills the command then."""
        with open(os.path.join(self.tmp, f"racer-{i}.err")) as f:
            return re.search(r"rlock: error: \S+: lock lost \(.*\); (killing|stopping) the command",
                             f.read()) is not None

    def check(self, racers, sc, key):
        history = racers.history()
        entered = {int(e[2]) for e in history if e[0] == "enter"}  # by rlock pid
        statuses = {}
        for i, (p, role, _) in enumerate(racers.all):
            allowed = sc.victims.get(p.pid, sc.allowed)
            statuses[p.returncode] = statuses.get(p.returncode, 0) + 1
            if p.returncode not in allowed:
                with open(os.path.join(self.tmp, f"racer-{i}.err")) as f:
                    err = f.read()
                self.fail(f"{sc.name}: {role} {p.pid} exited {p.returncode}, allowed "
                          f"{sorted(allowed)}; its stderr:\n{err}")
            if p.returncode == OK:
                self.assertIn(p.pid, entered, f"{sc.name}: racer {p.pid} exited 0 without running")
            elif p.returncode == LOST and p.pid not in entered:
                self.assertTrue(self.lost_before_its_command_ran(i),
                                f"{sc.name}: racer {p.pid} exited 76 without running, and "
                                "without saying that it lost the lock")

        # Overlaps, as the kernel saw them.
        overlaps = [e for e in history if e[0] == "overlap"]
        ends = {e[1]: int(e[4]) for e in history if e[0] == "overlap_end"}
        windows = []
        for e in overlaps:
            pid, fence, t, other = e[1], e[3], int(e[4]), e[5]
            where = f"{sc.name}: section {pid} (fence {fence}) entered while fence {other} was inside"
            self.assertIsNotNone(sc.documented, "overlap outside the documented cases: " + where)
            self.assertIn(other, sc.documented_fences, "overlap with a non-victim: " + where)
            self.assertGreater(int(fence), int(other), "fences out of order: " + where)
            self.assertIn(pid, ends, where + ", and it never got in")
            windows.append((ends[pid] - t) / 1e6)

        # Fences increase with entry time, also across a restart that lost every key: a new
        # counter starts from the server's clock, above every fence handed out before.
        enters = sorted((int(e[4]), int(e[3])) for e in history if e[0] == "enter")
        if sc.limit == 1:
            fences = [f for _, f in enters]
            for a, b in zip(fences, fences[1:]):
                self.assertLess(a, b, f"{sc.name}: fence {b} entered after fence {a}")

        # Nothing left behind: no section alive, no lock or waiting-room key.
        sections = {int(e[1]) for e in history if e[0] in ("enter", "overlap")}
        alive = [pid for pid in sections if pid_alive(pid, os.path.basename(SECTION))]
        self.assertEqual(alive, [], f"{sc.name}: sections outlived their rlock")

        def leftovers():
            keys = self.server.cmd("KEYS", "*")  # test-only: a private server, a few keys
            # The counters, and the ends of runs a re-sent end would find (a minute).
            return sorted(k for k in keys
                          if not k.endswith((":rlock:fence", ":rlock:history", ":rlock:ended",
                                             ":rlock:last-success")))
        try:
            wait_until(lambda: not leftovers(), TTL_MS / 1000 * 2 + 2, "keys to be gone")
        except AssertionError:
            self.fail(f"{sc.name}: keys left behind: {leftovers()}")

        ran = sum(1 for e in history if e[0] == "enter")
        window = f", overlap window max {max(windows):.0f} ms" if windows else ""
        REPORT.append(
            f"{sc.name:<22} limit {sc.limit}  racers {len(racers.all):>3}  sections run {ran:>3}"
            f"  faults {sc.faults}  exits {dict(sorted(statuses.items()))}"
            f"  overlaps {len(overlaps)}{' (' + sc.documented + ')' if overlaps else ''}{window}"
            f"  keys left 0" + ("  " + "; ".join(sc.notes) if sc.notes else ""))

    # The faults ---------------------------------------------------------------------------------

    def test_redis_killed_and_restarted_empty(self):
        sc = Scenario("redis-killed-restarted", redis_wide=True, unavailable=True)

        def fault(racers, sc, server):
            p, section = self.victim(racers)
            sc.victims[p.pid] = {LOST}
            killed = now_ns()
            server.kill()
            sc.faults += 1
            dead = wait_dead(section, 5, "the victim's command to be stopped")
            self.assertLess(dead - killed, TTL_MS * 1e6, "victim ran on past its lease")
            self.assertEqual(p.wait(timeout=10), LOST)
            # Restarted empty, after the longest ttl (Redis' advice for servers without
            # persistence: docs/DESIGN.md "Proven under faults"); fences go on increasing.
            time.sleep(TTL_MS / 1000)  # the restart delay itself, not a synchronisation
            server.start(port=server.port)
            sc.notes.append(f"victim stopped {(dead - killed) / 1e6:.0f} ms after the kill")
        self.race(sc, fault)

    def outage(self, what, inject, heal=lambda server: None):
        """A fault of the whole server for 2.5 ttl: the victim's command must be stopped within
        its lease, before the key could expire on the server."""
        def fault(racers, sc, server):
            p, section = self.victim(racers)
            sc.victims[p.pid] = {LOST}
            began = now_ns()
            inject(server)
            sc.faults += 1
            try:
                dead = wait_dead(section, 5, "the victim's command to be stopped")
                self.assertLess(dead - began, TTL_MS * 1e6, "victim ran on past its lease")
                wait_until(lambda: now_ns() - began > 2.5 * TTL_MS * 1e6, 5, f"2.5 ttl of {what}")
            finally:
                heal(server)
            self.assertEqual(p.wait(timeout=10), LOST)
            sc.notes.append(f"victim stopped {(dead - began) / 1e6:.0f} ms into the {what}")
        return fault

    def test_redis_frozen_longer_than_the_ttl(self):
        for limit in (1, 3):
            with self.subTest(limit=limit):
                # A waiter whose acquire Redis answers only after the thaw, too late to run the
                # command on that lease, gives the lock back and exits 69: correct, and more
                # likely the slower the machine.
                sc = Scenario("redis-frozen", limit, redis_wide=True, unavailable=True)
                self.race(sc, self.outage("freeze", lambda s: s.freeze(), lambda s: s.thaw()))
                self.tearDown()
                self.setUp()

    def test_rlock_stopped_past_its_ttl(self):
        """rlock alone stopped (SIGSTOP) past its ttl: its guardian stops the command by the end
        of the last confirmed lease, so the next holder runs alone; on resume rlock exits 76."""
        sc = Scenario("rlock-stopped")

        def fault(racers, sc, server):
            p, section = self.victim(racers)
            sc.victims[p.pid] = {LOST}
            entered_before = len(racers.entered_since(0))
            os.kill(p.pid, signal.SIGSTOP)
            sc.faults += 1
            try:
                wait_dead(section, 10, "the stopped holder's command to be stopped by its guardian")
                wait_until(lambda: len(racers.entered_since(0)) > entered_before, 10,
                           "a new holder once the stopped one's lease ended")
            finally:
                os.kill(p.pid, signal.SIGCONT)
            self.assertEqual(p.wait(timeout=10), LOST)
        self.race(sc, fault)

    def test_whole_job_frozen_past_its_ttl(self):
        """The documented case: a holder's whole job (rlock, its guardian and the command)
        frozen past its ttl, as on a paused VM, overlaps the next holder until it resumes, when
        its command is killed at once; the fence orders the two."""
        sc = Scenario("job-frozen")
        sc.documented = "documented: holder's whole job frozen past its ttl"

        def fault(racers, sc, server):
            p, section = self.victim(racers)
            sc.victims[p.pid] = {LOST}
            with open(f"/proc/{section}/environ", "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
            sc.documented_fences.add(env[b"RLOCK_FENCE"].decode())
            guardian, group = guardian_of(p.pid)[0], os.getpgid(section)
            # The guardian first, so that it never acts while the rest is stopped.
            os.kill(guardian, signal.SIGSTOP)
            os.kill(p.pid, signal.SIGSTOP)
            os.killpg(group, signal.SIGSTOP)
            sc.faults += 1
            try:
                wait_until(lambda: [e for e in racers.history() if e[0] == "overlap"], 10,
                           "a new holder once the frozen one's ttl ran out")
            finally:
                resumed = now_ns()
                os.kill(p.pid, signal.SIGCONT)  # rlock first: it kills the command at once
                os.kill(guardian, signal.SIGCONT)
                try:
                    os.killpg(group, signal.SIGCONT)
                except ProcessLookupError:
                    pass  # rlock killed the group first: what resuming it first is for
            dead = wait_dead(section, 5, "the frozen holder's command to be killed on resume")
            self.assertLess(dead - resumed, 1e9, "not killed the moment rlock resumed")
            self.assertEqual(p.wait(timeout=10), LOST)
            sc.notes.append(f"command killed {(dead - resumed) / 1e6:.1f} ms after SIGCONT")
        self.race(sc, fault)

    def test_rlock_killed_mid_run(self):
        for limit in (1, 3):
            with self.subTest(limit=limit):
                sc = Scenario("rlock-sigkilled", limit)

                def fault(racers, sc, server):
                    for _ in range(3):
                        p, section = self.victim(racers, hold_ms=5000)
                        sc.victims[p.pid] = {-signal.SIGKILL}
                        p.kill()
                        sc.faults += 1
                        wait_dead(section, 2, "the command of a SIGKILLed rlock to be stopped")
                self.race(sc, fault)
                self.tearDown()
                self.setUp()

    def test_network_cut(self):
        why_not = NetnsRedis.available()
        if why_not:
            self.skipTest(f"network namespaces unavailable here ({why_not})")
        server = NetnsRedis()
        sc = Scenario("network-cut", redis_wide=True, unavailable=True)
        self.race(sc, self.outage("cut", lambda s: s.cut(), lambda s: s.heal()), server=server,
                  url=server.url)

    def test_release_force(self):
        """`release --force`, over and over: its tombstone keeps every waiter out until the
        broken holder's command has stopped, so no overlap at all (unlike a hand-made DEL)."""
        for limit, breaks in ((1, 20), (3, 10)):
            with self.subTest(limit=limit):
                sc = Scenario("release-force", limit)

                def fault(racers, sc, server, breaks=breaks):
                    stopped, freed = [], []
                    for _ in range(breaks):
                        p, section = self.victim(racers)
                        sc.victims[p.pid] = {LOST}
                        with open(f"/proc/{section}/environ", "rb") as f:
                            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0")
                                       if b"=" in v)
                        broke = now_ns()
                        r = subprocess.run(
                            [RLOCK, "release", "--force", "--token",
                             env[b"RLOCK_TOKEN"].decode(), racers.key],
                            env=rlock_env(RLOCK_REDIS_URL=server.url), capture_output=True,
                            text=True, timeout=30)
                        self.assertEqual(r.returncode, 0, r.stderr)
                        self.assertIn("broken", r.stdout)
                        sc.faults += 1
                        dead = wait_dead(section, 5, "the broken holder's command to stop")
                        stopped.append((dead - broke) / 1e6)
                        self.assertEqual(p.wait(timeout=10), LOST)
                        # Its rlock ends the tombstone once the command is gone; a waiter
                        # then gets in at once (woken, not by polling).
                        entered = wait_until(lambda: racers.entered_since(dead), 10,
                                             "a waiter in after the broken holder stopped")
                        freed.append((min(int(e[4]) for e in entered) - dead) / 1e6)
                    sc.notes.append(f"broken holder stopped within {max(stopped):.0f} ms, the "
                                    f"next holder in {max(freed):.0f} ms after it (max)")
                self.race(sc, fault)
                self.tearDown()
                self.setUp()

    def test_lock_deleted_by_hand(self):
        """The other documented case: a lock deleted by hand (DEL, or release --force --now) is
        free at once, and its holder learns it at its next renewal, within ttl/3."""
        sc = Scenario("key-deleted")
        sc.documented = "documented: lock deleted by hand"

        def fault(racers, sc, server):
            p, section = self.victim(racers)
            sc.victims[p.pid] = {LOST}
            value = server.cmd("GET", racers.key)
            sc.documented_fences.add(value.rsplit("fence=", 1)[1])
            deleted = now_ns()
            server.cmd("DEL", racers.key)
            sc.faults += 1
            dead = wait_dead(section, 5, "the victim's command to be stopped")
            self.assertLess(dead - deleted, TTL_MS * 1e6, "not stopped within one ttl")
            self.assertEqual(p.wait(timeout=10), LOST)
            sc.notes.append(f"victim stopped {(dead - deleted) / 1e6:.0f} ms after the DEL")
        self.race(sc, fault)

    def test_lock_overwritten_by_hand(self):
        sc = Scenario("key-overwritten")

        def fault(racers, sc, server):
            p, section = self.victim(racers)
            sc.victims[p.pid] = {LOST}
            server.cmd("SET", racers.key, "someone-else", "PX", str(2 * TTL_MS))
            sc.faults += 1
            wait_dead(section, 5, "the victim's command to be stopped")
            self.assertEqual(p.wait(timeout=10), LOST)
        self.race(sc, fault)

    def test_client_pause(self):
        sc = Scenario("client-pause", redis_wide=True, unavailable=True)  # as redis-frozen

        def pause(server):
            ms = str(int(2.5 * TTL_MS))
            try:
                server.cmd("CLIENT", "PAUSE", ms, "ALL")
            except RespError:  # Redis 6.0 has no mode argument: it pauses all clients
                server.cmd("CLIENT", "PAUSE", ms)
        self.race(sc, self.outage("pause", pause))

    def test_maxmemory_reached(self):
        sc = Scenario("maxmemory-noeviction", unavailable=True)  # no new lock under OOM: 69

        def fault(racers, sc, server):
            p, section = self.victim(racers, hold_ms=2500)
            sc.victims[p.pid] = {OK}  # holding (renewing, releasing) works under OOM
            server.cmd("CONFIG", "SET", "maxmemory-policy", "noeviction")
            server.cmd("CONFIG", "SET", "maxmemory", "1")  # below what is used: every write
            sc.faults += 1
            try:
                self.assertEqual(p.wait(timeout=15), OK)
                refused = wait_until(
                    lambda: [p for p, role, _ in racers.all if p.poll() == UNAVAILABLE],
                    10, "an acquisition refused under OOM")
                sc.notes.append(f"{len(refused)} acquisitions refused under OOM")
            finally:
                server.cmd("CONFIG", "SET", "maxmemory", "0")
        self.race(sc, fault)


if __name__ == "__main__":
    unittest.main()
