"""Randomized faults: a nemesis, as in Jepsen or etcd's robustness tests, against several hosts
racing for a few keys.

test_faults.py breaks one thing at a time, the same way each run. Here three keys are raced by
two or three simulated hosts each (RLOCK_HOSTNAME=host-N; host-4 reaches Redis through a relay
that can slow its replies), one `rlock run --wait 60s --ttl 1000ms KEY -- SECTION` per host at
a time, while a seeded schedule picks fault after fault from KINDS: a holder's rlock, its
guardian or its whole job SIGSTOPped (shorter and longer than the ttl) or rlock SIGKILLed; the
server frozen, paused, restarted with or without its data, or its connections killed; the key
deleted or broken with `rlock release --force`; replies delayed on one host's link; a holder's
stderr a full pipe nobody reads for longer than the ttl; a signal that ends a process sent to a
holder's rlock (the command gets it, the lock is free within a second of its end) or to its
guardian (nothing changes).

The section is test_faults' (tests/faults/section.cpp): it holds a kernel flock on its key's
probe file while inside, so a newcomer that finds it taken has caught an overlap, and logs the
fence in its way. After the run the checker reads every key's log and reports:
  - every overlap, with the fault that allows it when that fault's kind is documented (a whole
    job frozen past its ttl, a key deleted by hand: docs/DESIGN.md "Proven under faults"), the
    newcomer's fence the greater; any other overlap is a failure;
  - a section alive after its rlock exited; a racer with an exit status that no fault it lived
    through explains (or exited 0 without running); fences not increasing with entry time;
    a key whose sections never ran again after a fault; lock keys left in Redis at the end.

`rlock run` alone SIGSTOPped past its ttl (rlock-stop-long) is not documented: the guardian is
to stop the command at the end of the last confirmed lease. A binary without that shows the
overlap, reported under its own cause.

Seeded: RLOCK_FAULT_SEED=N replays a run's schedule (timing still differs); the seed is printed
either way. RLOCK_RANDOM_FAULTS_SECONDS sets the length of the fault phase (default 45),
RLOCK_RANDOM_FAULTS_KINDS=a,b restricts the kinds. The summary is printed and written to
$RLOCK_BUILD_DIR/random-faults-report.txt. bench/soak_faults.py runs the same for longer.
"""
import collections
import fcntl
import os
import random
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (RLOCK, RedisServer, RespError, assert_no_processes_left, cluster_owner,
                     pid_alive, rlock_env, start_cluster, wait_until)
from test_faults import LOST, OK, SECTION, TTL_MS, UNAVAILABLE, Racers, now_ns

TTL = TTL_MS / 1000
KEYS = 3
HOSTS = ("host-1", "host-2", "host-3", "host-4")
SLOW_HOST = "host-4"      # its racers reach Redis through the SlowLink
PUMP_GAP = 0.02           # a host's loop looks at its racer every 20 ms
RETRY_GAP = (0.1, 0.3)    # after a racer failed (Redis down: 69 at once), before the next
WARM_UP = 1.0             # racing before the first fault
RECOVERY_TIMEOUT = 30     # for a section to run again on the keys a fault touched
DRAIN_TIMEOUT = 40

KILLED = -signal.SIGKILL
F_SETPIPE_SZ = 1031


class Kind:
    """A kind of fault: what it strikes, for how long (in ttls), which exit statuses it may
    cause, and whether an overlap it causes is documented (then the text says why)."""

    def __init__(self, target, dur=(0, 0), victim=(), others=(), documented=None, note=None,
                 bound=None):
        self.target = target            # "holder", "server", "link" or "cluster"
        self.dur = dur
        self.victim = set(victim)       # the victim's statuses (holder faults)
        self.others = set(others)       # any racer alive meanwhile (server) / on the slow host
        self.documented = documented
        self.note = note                # what an undocumented overlap of this kind means
        self.bound = bound              # FAULT -> the longest a documented overlap may last, s


WIDE = (UNAVAILABLE, LOST)
# Catchable, and their default action ends a process (rlock-run(1) "Signals and terminals").
ENDING_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1,
                  signal.SIGUSR2, signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF, signal.SIGIO,
                  signal.SIGPWR, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSYS, signal.SIGSEGV,
                  signal.SIGABRT, signal.SIGRTMIN, signal.SIGRTMAX)  # a racer started in an outage exits 69; a holder may lose its lock
KINDS = {
    "rlock-stop-short": Kind("holder", (0.2, 0.4), victim=(OK, LOST)),
    "rlock-stop-long": Kind("holder", (1.5, 2.5), victim=(LOST,),
                            note="rlock alone frozen past its ttl: NOT documented, its guardian "
                                 "must stop the command at the lease's end"),
    "guardian-stop-short": Kind("holder", (0.2, 0.4), victim=(OK,)),
    "guardian-stop-long": Kind("holder", (1.5, 2.5), victim=(OK,)),
    "job-stop-short": Kind("holder", (0.2, 0.4), victim=(OK, LOST)),
    "job-stop-long": Kind("holder", (1.5, 2.5), victim=(LOST,),
                          documented="a whole job frozen past its ttl (a frozen host)",
                          bound=lambda f: f.step["dur"] + 0.5),  # killed as soon as it runs
    "rlock-kill": Kind("holder", victim=(KILLED,)),
    "key-del": Kind("holder", victim=(LOST,), documented="the lock deleted by hand (DEL)",
                    bound=lambda f: TTL),  # its holder learns it at its next renewal
    "release-force": Kind("holder", victim=(LOST,)),
    "redis-freeze": Kind("server", (1.5, 2.5), others=WIDE),
    "redis-restart-data": Kind("server", others=WIDE),
    "redis-restart-empty": Kind("server", (1.0, 1.0), others=WIDE),
    "client-pause": Kind("server", (1.5, 2.5), others=WIDE),
    "client-kill": Kind("server", others=WIDE),
    "slow-link": Kind("link", (1.5, 3.0), others=WIDE),
    # rlock's own plumbing: a stderr that stops being read (rlock -v writes a line a renewal)
    # must not cost the lease; a signal that ends a process, sent to rlock, reaches the command
    # and the lock is given back at its end; sent to the guardian, it changes nothing.
    "stderr-stall": Kind("holder", (1.5, 2.5), victim=(OK,)),
    "signal-rlock": Kind("holder", victim={128 + s for s in ENDING_SIGNALS}),
    "signal-guardian": Kind("holder", victim=(OK,)),
    # Cluster mode (RandomRun(cluster=True)): the master of a key's slot killed with kill -9
    # (its replica promoted, then the dead node restarted, to rejoin as a replica), shut down
    # and restarted with its data, or failed over to its replica (CLUSTER FAILOVER).
    "master-kill": Kind("cluster", others=WIDE),
    "master-restart": Kind("cluster", others=WIDE),
    "master-failover": Kind("cluster", others=WIDE),
}
# The kinds of each mode: holder faults in both; the server's and the link's with one server;
# the masters' in a Cluster, whose racers come through its seeds (no slow link).
SINGLE_KINDS = sorted(n for n, k in KINDS.items() if k.target != "cluster")
CLUSTER_KINDS = sorted(n for n, k in KINDS.items() if k.target in ("holder", "cluster"))


class SlowLink:
    """A TCP relay in front of redis-server for the hosts on a slow link: requests go through at
    once (the server acts on them on time), every reply is delivered `delay` seconds after it
    came, in order, and `delay` may change at any moment. Unlike harness.DelayProxy it outlives
    a server that is down (it closes the client's connection) or restarted."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.delay = 0.0
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ)
        self.peer = {}     # socket -> its other end
        self.queue = {}    # client socket -> deque of [due, bytes, or None for end of file]
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def close(self):
        self.stopping = True
        self.thread.join(timeout=5)
        for s in list(self.peer):
            self._drop(s)
        self.listener.close()

    def _drop(self, s):
        for x in (s, self.peer.get(s)):
            if x is None:
                continue
            try:
                self.sel.unregister(x)
            except (KeyError, ValueError):
                pass
            self.peer.pop(x, None)
            self.queue.pop(x, None)
            x.close()

    def _accept(self):
        client, _ = self.listener.accept()
        try:
            server = socket.create_connection(("127.0.0.1", self.target_port), timeout=1)
            server.settimeout(None)
        except OSError:  # the server is down: the host sees a refused connection
            client.close()
            return
        self.peer[client], self.peer[server] = server, client
        self.queue[client] = collections.deque()
        self.sel.register(client, selectors.EVENT_READ, "client")
        self.sel.register(server, selectors.EVENT_READ, "server")

    def _loop(self):
        while not self.stopping:
            timeout = 0.05
            heads = [q[0][0] for q in self.queue.values() if q]
            if heads:
                timeout = max(0.0, min(timeout, min(heads) - time.monotonic()))
            for key, _ in self.sel.select(timeout):
                s = key.fileobj
                if s is self.listener:
                    self._accept()
                    continue
                if s not in self.peer:
                    continue
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if key.data == "client":
                    try:
                        if not data:
                            raise OSError("client closed")
                        self.peer[s].sendall(data)
                    except OSError:
                        self._drop(s)
                    continue
                q = self.queue[self.peer[s]]
                due = time.monotonic() + self.delay
                q.append([max(due, q[-1][0]) if q else due, data or None])
                if not data:  # the server closed: the client learns it after what came before
                    self.sel.unregister(s)
            now = time.monotonic()
            for client, q in list(self.queue.items()):
                while q and q[0][0] <= now:
                    _, data = q.popleft()
                    try:
                        if data is None:
                            raise OSError("server closed")
                        client.sendall(data)
                    except OSError:
                        self._drop(client)
                        break


class Racer:
    def __init__(self, proc, key, host, role, hold_ms):
        self.proc, self.key, self.host, self.role, self.hold_ms = proc, key, host, role, hold_ms
        self.pid = proc.pid
        self.spawned = now_ns()
        self.ended = None          # when first seen exited
        self.sections = []         # section pids (enter or overlap lines with this ppid)
        self.entered = None        # (section pid, fence, t_ns) of its enter line
        self.victim_of = []        # faults that struck it
        self.sigkilled = False


class HostRacers(Racers):
    """test_faults' Racers for one key, raced by one rlock at a time per simulated host instead
    of CONCURRENCY at once. The log is read as it grows."""

    def __init__(self, tmp, key, hosts, urls, rng, problems, extra=()):
        os.mkdir(tmp)
        super().__init__(tmp, None, key, 1, rng)
        self.hosts, self.urls, self.problems = hosts, urls, problems
        self.extra = list(extra)   # more options of `rlock run`
        self.racers = {}           # rlock pid -> Racer
        self.current = {}          # host -> its racer
        self.next_at = {}          # host -> when it may start the next one
        self.live = []
        self.events = []           # the log, split
        self.by_section = {}       # section pid -> Racer
        self.spawn_failures = 0
        self._offset = 0
        self._partial = b""

    def hold(self):
        """A section's length: mostly short handoffs, sometimes a longer job."""
        if self.rng.random() < 0.1:
            return self.rng.randint(500, 2000)
        return self.rng.randint(20, 150)

    def spawn(self, hold_ms, role="racer", host=None, stderr=None):
        """A racer; with STDERR (a descriptor), one that writes its -v lines there."""
        args = [RLOCK] + (["-v"] if stderr is not None else []) + [
            "run", "--wait", "60s", "--ttl", f"{TTL_MS}ms"] + self.extra + [self.key, "--",
            SECTION, self.log, self.probe, "1", str(hold_ms)]
        env = rlock_env(RLOCK_REDIS_URL=self.urls[host], RLOCK_HOSTNAME=host)
        with self.lock:
            path = os.path.join(self.tmp, f"racer-{len(self.all)}.err")
            try:
                with open(path, "w") as err:
                    p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                         stderr=err if stderr is None else stderr,
                                         start_new_session=True)
            except OSError:  # the binary is being rebuilt (the lead's ninja): try again later
                self.spawn_failures += 1
                return None
            p.err_path = path
            self.all.append([p, role, hold_ms])
            r = Racer(p, self.key, host, role, hold_ms)
            self.racers[p.pid] = r
            self.live.append(r)
            return r

    def _pump(self):
        while not self.stopping.is_set():
            now = time.monotonic()
            self.refresh()
            for host in self.hosts:
                r = self.current.get(host)
                if (r is None or r.ended is not None) and now >= self.next_at.get(host, 0):
                    self.current[host] = self.spawn(self.hold(), "racer", host)
                    if self.current[host] is None:
                        self.next_at[host] = now + 0.5
            self.stopping.wait(PUMP_GAP)  # pacing

    def refresh(self):
        """Reads what the log gained, and notices racers that ended."""
        with self.lock:
            self._tail()
            for r in list(self.live):
                if r.proc.poll() is None:
                    continue
                r.ended = now_ns()
                self.live.remove(r)
                rc = r.proc.returncode
                if r.role == "racer":
                    self.next_at[r.host] = time.monotonic() + (
                        0 if rc == OK else self.rng.uniform(*RETRY_GAP))
                if r.sigkilled:
                    continue  # its guardian kills the section a moment later: the fault checks
                self._tail()
                for s in r.sections:
                    if pid_alive(s, os.path.basename(SECTION)):
                        self.problems.append(
                            f"{self.key}: section {s} of {r.role} {r.pid} ({r.host}) alive "
                            f"after its rlock exited {rc}")

    def _tail(self):
        try:
            with open(self.log, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            e = line.decode().split()
            self.events.append(e)
            section, rlock = int(e[1]), int(e[2])
            r = self.racers.get(rlock)
            if r is None:
                continue
            if section not in r.sections and e[0] in ("enter", "overlap"):
                r.sections.append(section)
                self.by_section[section] = r
            if e[0] == "enter":
                r.entered = (section, e[3], int(e[4]))

    def history(self):
        with self.lock:
            self._tail()
            return list(self.events)

    def inside(self, rlock_pid):
        self.refresh()
        with self.lock:
            r = self.racers[rlock_pid]
            return r.entered[0] if r.entered else None

    def entered_since(self, t_ns):
        self.refresh()
        with self.lock:
            return [r for r in self.racers.values() if r.entered and r.entered[2] >= t_ns]

    def stop(self):
        stuck = super().stop()
        self.refresh()
        for r in self.racers.values():
            if r.ended is None:
                r.ended = now_ns()
        return stuck


class Fault:
    def __init__(self, n, name, step, key=None, host=None):
        self.n, self.name, self.kind = n, name, KINDS[name]
        self.step, self.key, self.host = step, key, host
        self.start = self.end = None
        self.victim = None         # Racer
        self.fence = None          # the victim's fence
        self.note = ""

    def label(self):
        where = f" {self.key} {self.host}" if self.key else (
            f" {self.host}" if self.host else "")
        return f"#{self.n} {self.name}{where}"


def schedule(seed, names):
    """The run's plan from SEED: which hosts race for which key, the racers' seeds, then an
    endless sequence of steps, dealt like cards so that every kind comes up in each round."""
    rng = random.Random(seed)
    topology = []
    for k in range(KEYS):
        topology.append(sorted(rng.sample(HOSTS, rng.choice((2, 3)))))
    if not any(SLOW_HOST in hosts for hosts in topology):
        topology[rng.randrange(KEYS)][-1] = SLOW_HOST
        topology = [sorted(set(h)) for h in topology]
    racer_seeds = [rng.randrange(2**32) for _ in range(KEYS)]

    def steps():
        while True:
            deck = sorted(names)
            rng.shuffle(deck)
            for name in deck:
                lo, hi = KINDS[name].dur
                yield {"name": name, "key": rng.randrange(KEYS), "pick": rng.random(),
                       "dur": rng.uniform(lo, hi) * TTL, "delay": rng.uniform(0.2, 0.6) * TTL,
                       "extra": rng.uniform(0.5, 1.5), "gap": rng.uniform(0.2, 0.8)}
    return topology, racer_seeds, steps()


class RandomRun:
    """One randomized run: setup, the nemesis for SECONDS, the drain, the checks. result() has
    the figures; problems the failures."""

    def __init__(self, seed, seconds, kinds=None, say=print, cluster=False):
        self.seed, self.seconds, self.say, self.cluster = seed, seconds, say, cluster
        allowed = CLUSTER_KINDS if cluster else SINGLE_KINDS
        wrong = sorted(set(kinds or ()) - set(allowed))
        if wrong:
            mode = "Cluster" if cluster else "single server"
            raise ValueError(f"fault kinds {wrong} are not of the {mode} mode")
        self.kinds = sorted(kinds or allowed)
        self.nodes = []
        self.problems = []
        self.faults = []
        self.overlaps = []         # dicts
        self.stopped = []          # (kind, id) stopped by us and not yet continued
        self.tmp = tempfile.mkdtemp(prefix="rlock-random-faults-")
        self.server = self.link = None
        self.keys = []
        self.started = None

    # Setup and teardown ---------------------------------------------------------------------

    def setup(self):
        # Signals of faults are among those sent: no core files from the sections they end.
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        wait_until(lambda: os.access(RLOCK, os.X_OK) and os.access(SECTION, os.X_OK), 300,
                   f"{RLOCK} and {SECTION} (being rebuilt?)", interval=1)
        self.topology, racer_seeds, self.steps = schedule(self.seed, self.kinds)
        if self.cluster:
            # Every racer through every node as a seed; --min-replicas 1, so that a master
            # killed before replication copied a lock cannot lose it (docs/DESIGN.md).
            self.nodes = start_cluster("--cluster-node-timeout", "1000", replicas=1)
            self.url = "redis://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
            urls = {h: self.url for h in HOSTS}
            extra = ["--min-replicas", "1"]
        else:
            self.server = RedisServer()
            self.url = self.server.url
            self.link = SlowLink(self.server.port)
            urls = {h: self.server.url for h in HOSTS}
            urls[SLOW_HOST] = self.link.url
            extra = []
        for k, hosts in enumerate(self.topology):
            self.keys.append(HostRacers(os.path.join(self.tmp, f"key{k}"), f"rf:{k}", hosts,
                                        urls, random.Random(racer_seeds[k]), self.problems,
                                        extra))

    def close(self):
        """Continues whatever is still stopped and kills everything started."""
        for what, ident in self.stopped:
            try:
                if what == "group":
                    os.killpg(ident, signal.SIGCONT)
                elif what == "server":
                    self.server.thaw()
                else:
                    os.kill(ident, signal.SIGCONT)
            except (ProcessLookupError, OSError):
                pass
        self.stopped = []
        for k in self.keys:
            k.stopping.set()
            if k.thread.is_alive():
                k.thread.join()
            for p, _, _ in k.all:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    p.wait()
            with k.lock:
                sections = list(k.by_section)
            for s in sections:  # a section whose rlock was killed with it (SIGKILL of a job)
                if pid_alive(s, os.path.basename(SECTION)):
                    try:
                        os.kill(s, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        if self.link:
            self.link.close()
        if self.server:
            self.server.stop()
        for n in self.nodes:
            n.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def owner(self, key):
        """The server that holds KEY: the one, or its slot's master in the Cluster."""
        if not self.cluster:
            return self.server
        live = [n for n in self.nodes if n.proc.poll() is None]
        return cluster_owner(live, key)

    # The run --------------------------------------------------------------------------------

    def run(self):
        self.setup()
        self.say(f"random faults: seed {self.seed} (rerun with RLOCK_FAULT_SEED={self.seed}), "
                 f"{self.seconds:.0f} s of faults, ttl {TTL_MS} ms; "
                 + "; ".join(f"{k.key}: {','.join(k.hosts)}" for k in self.keys)
                 + (" (a Cluster of three masters with a replica each)" if self.cluster
                    else f" ({SLOW_HOST} on the slow link)"))
        self.started = time.monotonic()
        for k in self.keys:
            k.start()
        time.sleep(WARM_UP)  # pacing: the racers race meanwhile; nothing waits on this
        deadline = time.monotonic() + self.seconds
        n = 0
        while time.monotonic() < deadline:
            step = next(self.steps)
            n += 1
            time.sleep(step["gap"])  # pacing the schedule
            self.strike(n, step)
        stuck = []
        for k in self.keys:
            stuck += k.stop()
        if stuck:
            self.problems.append(f"racers still running {DRAIN_TIMEOUT} s after the run: {stuck}")
        self.elapsed = time.monotonic() - self.started
        self.check()
        return self.result()

    def strike(self, n, step):
        name = step["name"]
        kind = KINDS[name]
        k = self.keys[step["key"]]
        if kind.target == "holder":
            f = Fault(n, name, step, k.key, k.hosts[int(step["pick"] * len(k.hosts))])
        elif kind.target == "cluster":
            f = Fault(n, name, step, host=f"{k.key}'s master")
        else:
            f = Fault(n, name, step, host=SLOW_HOST if kind.target == "link" else None)
        try:
            getattr(self, "fault_" + name.replace("-", "_"))(f, k)
        except AssertionError as e:
            self.problems.append(f"{f.label()}: {e}")
        if f.start is None:
            return
        self.faults.append(f)
        touched = [k] if kind.target == "holder" else self.keys
        for key in touched:
            try:
                wait_until(lambda: key.entered_since(f.end), RECOVERY_TIMEOUT,
                           f"a section on {key.key} after the fault")
            except AssertionError:
                self.problems.append(f"{f.label()}: no section ran on {key.key} within "
                                     f"{RECOVERY_TIMEOUT} s after it")
        victim = ""
        if f.victim:
            victim = f" victim {f.victim.pid} fence {f.fence}"
        self.say(f"  {f.label()}{victim} {(f.end - f.start) / 1e9:.2f} s{f.note}")

    # Holder faults --------------------------------------------------------------------------

    def victim(self, f, k, hold_s, stderr=None):
        """Starts a racer on F's host with a section of HOLD_S and waits until it is inside."""
        r = k.spawn(int(hold_s * 1000), "victim", f.host, stderr)
        if r is None:
            raise AssertionError("could not start the victim (binary missing?)")

        def inside():
            s = k.inside(r.pid)
            if s is None and r.proc.poll() is not None:
                raise AssertionError(f"the victim exited {r.proc.returncode} before entering")
            return s
        wait_until(inside, 20, f"the victim inside {k.key}")
        f.victim, f.fence = r, r.entered[1]
        r.victim_of.append(f)
        return r

    def _stop(self, what, ident):
        if what == "group":
            os.killpg(ident, signal.SIGSTOP)
        else:
            os.kill(ident, signal.SIGSTOP)
        self.stopped.append((what, ident))

    def _cont(self):
        for what, ident in self.stopped:
            try:
                if what == "group":
                    os.killpg(ident, signal.SIGCONT)
                else:
                    os.kill(ident, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.stopped = []

    def _freeze(self, f, k, parts):
        r = self.victim(f, k, f.step["dur"] + f.step["extra"] + 1)
        section = r.entered[0]
        guardian = wait_until(lambda: find_guardian(r.pid), 2, "the victim's guardian")
        pgid = os.getpgid(section)
        f.start = now_ns()
        try:
            if "rlock" in parts:
                self._stop("pid", r.pid)
            if "guardian" in parts:
                self._stop("pid", guardian)
            if "group" in parts:
                self._stop("group", pgid)
            time.sleep(f.step["dur"])  # the fault's length (pacing, not a synchronisation)
        finally:
            self._cont()
            f.end = now_ns()

    def fault_rlock_stop_short(self, f, k):
        self._freeze(f, k, {"rlock"})

    fault_rlock_stop_long = fault_rlock_stop_short

    def fault_guardian_stop_short(self, f, k):
        self._freeze(f, k, {"guardian"})

    fault_guardian_stop_long = fault_guardian_stop_short

    def fault_job_stop_short(self, f, k):
        self._freeze(f, k, {"rlock", "guardian", "group"})

    fault_job_stop_long = fault_job_stop_short

    def fault_rlock_kill(self, f, k):
        r = self.victim(f, k, 3)
        section = r.entered[0]
        r.sigkilled = True
        f.start = now_ns()
        r.proc.kill()
        try:
            wait_until(lambda: not pid_alive(section), 2, "the section of a SIGKILLed rlock "
                       "to be killed by its guardian", interval=0.002)
            f.note = f", section gone {(now_ns() - f.start) / 1e6:.1f} ms later"
        finally:
            f.end = now_ns()

    def fault_stderr_stall(self, f, k):
        r, w = os.pipe()
        fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
        os.set_blocking(w, False)
        try:  # full before the victim writes its first line
            while True:
                os.write(w, b"x" * 512)
        except BlockingIOError:
            pass
        os.set_blocking(w, True)  # as a pipe is: a write to it waits
        try:
            self.victim(f, k, f.step["dur"] + f.step["extra"] + 1, stderr=w)
        finally:
            os.close(w)
        f.start = now_ns()
        time.sleep(f.step["dur"])  # the fault's length (pacing, not a synchronisation)
        f.end = now_ns()
        # Read again, to the end: the victim's lines flow once more.
        threading.Thread(target=lambda: [None for _ in iter(lambda: os.read(r, 65536), b"")]
                         or os.close(r), daemon=True).start()

    def fault_signal_rlock(self, f, k):
        r = self.victim(f, k, 3)
        sig = ENDING_SIGNALS[int(f.step["extra"] * 1e6) % len(ENDING_SIGNALS)]
        f.start = now_ns()
        os.kill(r.pid, sig)
        f.note = f", SIG{signal.Signals(sig).name[3:]}"
        try:
            r.proc.wait(timeout=10)
            # The lock given back as the command ended, not left for its ttl: within a second
            # the key is free, or another racer's (they wait for it).
            wait_until(lambda: f"pid={r.pid} " not in (self.owner(k.key).cmd("GET", k.key) or ""), 1,
                       f"the victim's lock to be given back after SIG{signal.Signals(sig).name}")
        finally:
            f.end = now_ns()

    def fault_signal_guardian(self, f, k):
        r = self.victim(f, k, f.step["dur"] + 1)
        guardian = wait_until(lambda: find_guardian(r.pid), 2, "the victim's guardian")
        f.start = now_ns()
        for sig in ENDING_SIGNALS:
            os.kill(guardian, sig)
        f.end = now_ns()

    def fault_key_del(self, f, k):
        self.victim(f, k, 3)
        f.start = now_ns()
        f.note = f", DEL said {self.owner(k.key).cmd('DEL', k.key)}"
        f.end = now_ns()

    def fault_release_force(self, f, k):
        self.victim(f, k, 3)
        f.start = now_ns()
        r = subprocess.run([RLOCK, "release", "--force", k.key],
                           env=rlock_env(RLOCK_REDIS_URL=self.url), capture_output=True,
                           text=True, timeout=30)
        f.end = now_ns()
        if r.returncode != 0 or "broken" not in r.stdout:
            raise AssertionError(f"release --force exited {r.returncode}: {r.stdout}{r.stderr}")

    # Server and link faults -----------------------------------------------------------------

    def fault_redis_freeze(self, f, k):
        f.start = now_ns()
        try:
            self.server.freeze()
            self.stopped.append(("server", None))
            time.sleep(f.step["dur"])  # the fault's length (pacing)
        finally:
            self.server.thaw()
            self.stopped = [s for s in self.stopped if s[0] != "server"]
            f.end = now_ns()

    def fault_redis_restart_data(self, f, k):
        f.start = now_ns()
        try:
            self.server.cmd("SHUTDOWN", "SAVE")  # saves everything, then closes: no reply
        except (ConnectionError, OSError):
            pass
        self.server.proc.wait(timeout=10)
        self.server.start(port=self.server.port)
        f.end = now_ns()
        f.note = f", {self.server.cmd('DBSIZE')} keys back"

    def fault_redis_restart_empty(self, f, k):
        f.start = now_ns()
        self.server.kill()
        try:
            os.unlink(os.path.join(self.server.dir, "dump.rdb"))  # a restart-data's save
        except FileNotFoundError:
            pass
        # Restarted a ttl later, as Redis advises for servers without persistence (DESIGN.md).
        time.sleep(f.step["dur"])  # the restart delay (pacing)
        self.server.start(port=self.server.port)
        f.end = now_ns()

    def fault_client_pause(self, f, k):
        ms = str(int(f.step["dur"] * 1000))
        f.start = now_ns()
        try:
            self.server.cmd("CLIENT", "PAUSE", ms, "ALL")
        except RespError:  # Redis 6.0 has no mode argument: it pauses all clients
            self.server.cmd("CLIENT", "PAUSE", ms)
        time.sleep(f.step["dur"])  # the pause's length (pacing); the server ends it itself
        f.end = now_ns()

    def fault_client_kill(self, f, k):
        f.start = now_ns()
        f.note = f", {self.server.cmd('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')} " \
                 "connections killed"
        f.end = now_ns()

    def fault_slow_link(self, f, k):
        f.start = now_ns()
        self.link.delay = f.step["delay"]
        f.note = f", replies {f.step['delay'] * 1000:.0f} ms late"
        try:
            time.sleep(f.step["dur"])  # the fault's length (pacing)
        finally:
            self.link.delay = 0.0
            f.end = now_ns()

    # Cluster faults -------------------------------------------------------------------------

    def replica_of(self, master):
        for n in self.nodes:
            if n is not master and n.proc.poll() is None:
                info = n.cmd("INFO", "replication")
                if "role:slave" in info and f"master_port:{master.port}\r\n" in info:
                    return n
        raise AssertionError(f"no replica of {master.port}")

    def in_sync(self, replica):
        wait_until(lambda: "master_link_status:up" in replica.cmd("INFO", "replication"), 30,
                   f"{replica.port} to sync as a replica")

    def fault_master_kill(self, f, k):
        master = self.owner(k.key)
        replica = self.replica_of(master)
        f.start = now_ns()
        master.kill()
        try:
            wait_until(lambda: replica.cmd("ROLE")[0] == "master", 30, "the replica's promotion")
            f.note = f", {master.port} killed, {replica.port} promoted " \
                     f"{(now_ns() - f.start) / 1e9:.1f} s later"
        finally:
            master.start(port=master.port)  # its nodes.conf: it rejoins, as a replica
            self.in_sync(master)
            f.end = now_ns()

    def fault_master_restart(self, f, k):
        master = self.owner(k.key)
        f.start = now_ns()
        try:
            master.cmd("SHUTDOWN", "SAVE")  # saves everything, then closes: no reply
        except (ConnectionError, OSError):
            pass
        master.proc.wait(timeout=30)
        master.start(port=master.port)
        replica = self.replica_of(master) if "role:master" in master.cmd(
            "INFO", "replication") else master
        self.in_sync(replica)
        f.end = now_ns()
        f.note = f", {master.port} back as a {master.cmd('ROLE')[0]}"

    def fault_master_failover(self, f, k):
        master = self.owner(k.key)
        replica = self.replica_of(master)
        f.start = now_ns()
        replica.cmd("CLUSTER", "FAILOVER")
        try:
            wait_until(lambda: replica.cmd("ROLE")[0] == "master", 30, "the failover")
            self.in_sync(master)
        finally:
            f.end = now_ns()
        f.note = f", {replica.port} took over from {master.port}"

    # The checks -----------------------------------------------------------------------------

    def allowed(self, r):
        """The exit statuses that the faults R lived through explain."""
        ok = {OK}
        for f in self.faults:
            if r in (f.victim,):
                ok |= f.kind.victim
            if not f.kind.others or r.ended < f.start or r.spawned > f.end + TTL_MS * 1e6:
                continue
            if f.kind.target in ("server", "cluster") or r.host == f.host:
                ok |= f.kind.others
        return ok

    def cause(self, k, fence, t):
        """The fault an overlap with the holder of FENCE at T comes from, or None."""
        for f in self.faults:
            if f.key == k.key and f.fence == fence:
                return f
        for f in self.faults:  # else the nearest fault whose window covers it
            if f.start - TTL_MS * 1e6 <= t <= f.end + 2 * TTL_MS * 1e6:
                return f
        return None

    def check(self):
        for k in self.keys:
            events = k.history()
            ends = {e[1]: int(e[4]) for e in events if e[0] == "overlap_end"}
            for e in events:
                if e[0] != "overlap":
                    continue
                pid, fence, t, other = e[1], e[3], int(e[4]), e[5]
                newcomer = k.by_section.get(int(pid))
                f = self.cause(k, other, t)
                o = {"key": k.key, "fence": fence, "other": other, "fault": f,
                     "host": newcomer.host if newcomer else "?",
                     "window_ms": (ends[pid] - t) / 1e6 if pid in ends else None}
                documented = f is not None and f.kind.documented and f.fence == other
                o["cause"] = (f"{f.name}, documented: {f.kind.documented}" if documented else
                              f"{f.name}, {f.kind.note or 'NOT documented'}" if f else
                              "no fault near it, NOT documented")
                self.overlaps.append(o)
                holder = next((r for r in k.racers.values()
                               if r.entered and r.entered[1] == other), None)
                whose = holder.host if holder else "?"
                if f and f.fence == other:
                    whose += ", victim of " + f.label()
                where = (f"{k.key}: fence {fence} ({o['host']}) entered while fence {other} "
                         f"({whose}) was inside")
                if not documented:
                    self.problems.append(f"overlap: {where}; cause {o['cause']}")
                if not other.isdigit() or int(fence) <= int(other):
                    self.problems.append(f"fences out of order in an overlap: {where}")
                if pid not in ends:
                    self.problems.append(f"{where}, and the newcomer never got in")
                elif documented and f.kind.bound and o["window_ms"] > f.kind.bound(f) * 1000:
                    self.problems.append(f"overlap: {where} for {o['window_ms']:.0f} ms, longer "
                                         f"than {f.name} explains ({f.kind.bound(f):.2f} s)")
            # Fences increase with entry time, also across a restart that lost every key.
            enters = sorted((int(e[4]), int(e[3]), e[1]) for e in events if e[0] == "enter")
            for (ta, a, pa), (tb, b, pb) in zip(enters, enters[1:]):
                if a >= b:
                    self.problems.append(f"{k.key}: fence {b} (section {pb}) entered after "
                                         f"fence {a} (section {pa})")
            for r in k.racers.values():
                rc = r.proc.returncode
                allowed = self.allowed(r)
                if rc not in allowed:
                    try:
                        with open(r.proc.err_path) as err:
                            tail = err.read()[-600:]
                    except OSError:
                        tail = "?"
                    self.problems.append(
                        f"{k.key}: {r.role} {r.pid} ({r.host}) exited {rc}, allowed "
                        f"{sorted(allowed)} by the faults it lived through; stderr: {tail!r}")
                elif rc == OK and not r.entered:
                    self.problems.append(f"{k.key}: racer {r.pid} exited 0 without running")
            alive = [s for s in k.by_section if pid_alive(s, os.path.basename(SECTION))]
            if alive:
                self.problems.append(f"{k.key}: sections alive after the run: {alive}")

        def leftovers():
            # Test-only: private servers, a few keys; a Cluster's on each master.
            keys = [x for n in (self.nodes or [self.server]) if n.proc.poll() is None
                    and n.cmd("ROLE")[0] == "master" for x in n.cmd("KEYS", "*")]
            # The counters, and the ends of runs a re-sent end would find (a minute).
            return sorted(x for x in keys
                          if not x.endswith((":rlock:fence", ":rlock:history", ":rlock:ended",
                                             ":rlock:last-success")))
        try:
            wait_until(lambda: not leftovers(), TTL * 2 + 2, "lock keys to be gone")
        except AssertionError:
            self.problems.append(f"keys left in Redis: {leftovers()}")

    def result(self):
        racers = [r for k in self.keys for r in k.racers.values()]
        exits = collections.Counter(r.proc.returncode for r in racers)
        causes = collections.defaultdict(list)
        for o in self.overlaps:
            causes[o["cause"]].append(o["window_ms"] or 0)
        return {
            "seed": self.seed, "seconds": self.elapsed,
            "topology": {k.key: k.hosts for k in self.keys},
            "racers": len(racers),
            "sections": sum(1 for r in racers if r.entered),
            "exits": dict(sorted(exits.items(), key=lambda kv: (kv[0] is None, kv[0]))),
            "faults": collections.Counter(f.name for f in self.faults),
            "overlaps": {c: (len(w), max(w)) for c, w in sorted(causes.items())},
            "overlap_list": self.overlaps,
            "problems": list(self.problems),
        }


def find_guardian(rlock_pid):
    """The pid of RLOCK_PID's guardian: its child named rlock-guardian."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.find("(") + 1:stat.rfind(")")]
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == rlock_pid and comm == "rlock-guardian":
            return int(entry)
    return None


def report(res):
    """The summary: runs, faults by kind, overlaps by cause, problems."""
    lines = [f"seed {res['seed']}  ({res['seconds']:.0f} s, ttl {TTL_MS} ms; "
             + "; ".join(f"{k}: {','.join(h)}" for k, h in res["topology"].items()) + ")",
             f"runs: {res['racers']} racers, {res['sections']} sections run, "
             f"exits {res['exits']}",
             f"faults by kind ({sum(res['faults'].values())}): "
             + ", ".join(f"{k} {n}" for k, n in sorted(res["faults"].items())),
             "overlaps by cause:" + (" none" if not res["overlaps"] else "")]
    for cause, (n, window) in res["overlaps"].items():
        lines.append(f"  {n} x {cause} (window max {window:.0f} ms)")
    listed = res["overlap_list"][:20]
    for o in listed:
        f = o["fault"]
        lines.append(f"    {o['key']}: fence {o['fence']} ({o['host']}) over fence {o['other']}"
                     + (f" ({f.label()})" if f else "")
                     + (f", {o['window_ms']:.0f} ms" if o["window_ms"] is not None else ""))
    if len(res["overlap_list"]) > len(listed):
        lines.append(f"    ... and {len(res['overlap_list']) - len(listed)} more")
    lines.append(f"problems: {len(res['problems'])}")
    lines += ["  " + p for p in res["problems"]]
    return "\n".join(lines) + "\n"


def kinds_from_env():
    names = [n for n in os.environ.get("RLOCK_RANDOM_FAULTS_KINDS", "").split(",") if n]
    unknown = [n for n in names if n not in KINDS]
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {sorted(KINDS)}")
    return names or None


@unittest.skipIf(os.environ.get("RLOCK_SANITIZE"),
                 "long scenario tests run only in the plain build")
class RandomFaults(unittest.TestCase):
    def setUp(self):
        self.addCleanup(assert_no_processes_left)
        seed = int(os.environ.get("RLOCK_FAULT_SEED") or random.SystemRandom().randrange(2**32))
        seconds = float(os.environ.get("RLOCK_RANDOM_FAULTS_SECONDS") or 45)
        self.run_ = RandomRun(seed, seconds, kinds_from_env())

    def tearDown(self):
        self.run_.close()

    def test_random_faults(self):
        print()
        res = self.run_.run()
        text = report(res)
        print(text)
        build = os.environ.get("RLOCK_BUILD_DIR")
        if build:
            with open(os.path.join(build, "random-faults-report.txt"), "w") as f:
                f.write(text)
        self.assertEqual(res["problems"], [], f"seed {res['seed']}: see the report above")


if __name__ == "__main__":
    unittest.main()
