"""Test harness: real redis-servers on free ports, the real rlock binary, deadlines not sleeps.

Nothing here mocks Redis. A missing redis-server is an error, never a skip.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

# Every process a test starts inherits this mark in its environment, also after it left its
# session or was re-parented to init, so that teardown finds whatever a test left alive.
TREE_MARK = f"RLOCKTEST_TREE={os.getpid()}.{time.time_ns()}"
os.environ[TREE_MARK.split("=")[0]] = TREE_MARK.split("=")[1]
# `run -c` uses $SHELL: pin the one CI has (dash does not exec a list's last command, bash
# does), so that a test behaves here as it does there.
os.environ["SHELL"] = "/bin/sh"
# Servers outlive single tests by design (one per class); everything else must not.
LONG_LIVED = ("redis-server", "redis-sentinel", "valkey-server", "valkey-sentinel")

RLOCK = os.environ.get("RLOCK_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "rlock")


def server_binary(name):
    """The server program NAME ("server", "sentinel", "cli"): redis-NAME, or valkey-NAME, from
    $RLOCK_TEST_REDIS_BIN_DIR when set (a maintainer's build of another version: README
    "Supported servers"), else from PATH."""
    where = os.environ.get("RLOCK_TEST_REDIS_BIN_DIR")
    for program in (f"redis-{name}", f"valkey-{name}"):
        found = (os.path.join(where, program) if where else shutil.which(program))
        if found and os.access(found, os.X_OK):
            return found
    return None


REDIS_SERVER = server_binary("server")
REDIS_SENTINEL = server_binary("sentinel")

SOURCE_DIR = os.environ.get("RLOCK_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..",
                                                                 "..")
BUILD_DIR = os.environ.get("RLOCK_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")
# The harness's own user on servers whose default user has only what rlock needs.
ADMIN = ("rlock-test-admin", "rlock-test-admin-secret")


def least_privilege_section():
    """docs/REDIS.md "Least privilege": the ACL lines rlock's users are told to paste."""
    with open(os.path.join(SOURCE_DIR, "docs", "REDIS.md")) as f:
        text = f.read()
    match = re.search(r"^(#+) Least privilege\n", text, re.M)
    if not match:
        raise AssertionError('docs/REDIS.md has no "Least privilege" section')
    rest = text[match.end():]
    end = re.search(rf"^#{{1,{len(match.group(1))}}} ", rest, re.M)
    return rest[:end.start()] if end else rest


def documented_acl():
    """The rules of the `ACL SETUSER rlock ...` lines in docs/REDIS.md "Least privilege", each a
    list of rules, without the password: what rlock's users are told to grant."""
    section = least_privilege_section()
    rules = []
    for line in section.splitlines():
        if line.startswith("ACL SETUSER rlock "):
            rules.append([r for r in line.split()[3:] if not r.startswith(">")])
    if not rules:
        raise AssertionError('docs/REDIS.md "Least privilege" has no ACL SETUSER rlock line')
    return rules


# Under a sanitizer every rlock takes about 150 ms to start and exit (shadow memory, the leak
# check at exit): the big matrices of argument cases (test_bad_input, test_cli) run one case in
# this many there, the same ones each time, where the plain build runs them all. The code each
# case reaches is the parser's, which the sample reaches too.
SANITIZED_STRIDE = 4 if os.environ.get("RLOCK_SANITIZE") else 1


def sampled(number):
    """Whether case NUMBER of a matrix runs in this build: every SANITIZED_STRIDE-th."""
    return number % SANITIZED_STRIDE == 0


def wait_until(condition, timeout=10.0, what="condition", interval=0.005):
    """Polls CONDITION until it is truthy; fails the test after TIMEOUT seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RespError(Exception):
    pass


class RedisClient:
    """A minimal RESP2 client, so tests can look at keys without spawning redis-cli each time."""

    def __init__(self, port=None, unix=None, timeout=5.0, address=None):
        if address:
            self.sock = socket.create_connection(address, timeout=timeout)
        elif unix:
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.settimeout(timeout)
            self.sock.connect(unix)
        else:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    @classmethod
    def once(cls, address, *args, timeout=5.0):
        """ARGS sent to the server at ADDRESS (host, port) on a connection of its own."""
        c = cls(address=address, timeout=timeout)
        try:
            return c(*args)
        finally:
            c.close()

    def __call__(self, *args):
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self._read()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("connection closed")
                self.buf += chunk
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode("utf-8", "surrogateescape")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RespError(f"bad reply line {line!r}")


class RedisServer:
    """A private redis-server on a free port (and a unix socket) in its own directory."""

    def __init__(self, *extra_args, port=None):
        if not REDIS_SERVER:
            raise RuntimeError("redis-server is not installed (nor in $RLOCK_TEST_REDIS_BIN_DIR); "
                               "tests need a real Redis")
        self.dir = tempfile.mkdtemp(prefix="rlock-redis-")
        self.extra_args = list(extra_args)
        self.port = None
        self.proc = None
        self.acl = None  # the default user's rules, when restricted (restrict())
        self.start(port)

    def restrict(self, rules):
        """Gives the default user (rlock's, with no password) only RULES (lists of ACL rules,
        applied in order); the harness's own commands go as ADMIN. Again after a restart."""
        self.acl = rules
        c = RedisClient(self.port)
        try:
            c("ACL", "SETUSER", ADMIN[0], "on", ">" + ADMIN[1], "~*", "&*", "+@all")
            c("AUTH", *ADMIN)
            for r in rules:
                c("ACL", "SETUSER", "default", *r)
        finally:
            c.close()

    @property
    def unix_socket(self):
        return os.path.join(self.dir, "redis.sock")

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def start(self, port=None):
        for _ in range(20):
            self.port = port or free_port()
            self.proc = subprocess.Popen(
                [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                 "--unixsocket", self.unix_socket, "--dir", self.dir,
                 "--save", "", "--appendonly", "no", "--loglevel", "warning",
                 "--logfile", os.path.join(self.dir, "redis.log")] + self.extra_args,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_until(self._pings, timeout=5, what=f"redis-server on port {self.port}")
                if self.acl:
                    self.restrict(self.acl)  # a new process knows no user of the old one
                return
            except AssertionError:
                self.proc.kill()
                self.proc.wait()
                if port:
                    raise
        raise RuntimeError("could not start redis-server")

    def _pings(self):
        if self.proc.poll() is not None:
            raise AssertionError("redis-server exited at start")
        try:
            c = RedisClient(self.port, timeout=0.5)
            try:
                return c("PING") == "PONG"
            finally:
                c.close()
        except RespError as e:
            return str(e).startswith("NOAUTH")  # up, and wants a password
        except OSError:
            return False

    def client(self):
        c = RedisClient(self.port)
        if self.acl:
            c("AUTH", *ADMIN)
        return c

    def time_us(self):
        """The server's clock in microseconds: a fence drawn from now on is at least this."""
        secs, micros = self.cmd("TIME")
        return int(secs) * 1_000_000 + int(micros)

    def cmd(self, *args):
        c = self.client()
        try:
            return c(*args)
        finally:
            c.close()

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()

    def restart(self):
        """Stops the server and starts it again on the same port (data kept when saved)."""
        self.kill()
        self.start(port=self.port)

    def freeze(self):
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self):
        self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def processes_left():
    """{pid: command line} of the live processes that carry this test run's TREE_MARK, other
    than this one and the Redis servers."""
    mark = TREE_MARK.encode() + b"\0"
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = b"\0" + f.read()  # a zombie's is empty
            if b"\0" + mark not in env:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{entry}/comm") as f:
                comm = f.read().strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if not comm.startswith(LONG_LIVED):
            found[int(entry)] = cmdline or comm
    return found


def assert_no_processes_left(timeout=5.0):
    """Fails when a process a test started (or one of theirs) is still alive after TIMEOUT
    (for a guardian to act, a process to exit); kills them so later tests start clean."""
    left = {}

    def none_left():
        left.clear()
        left.update(processes_left())
        return not left
    try:
        wait_until(none_left, timeout, "no process left", interval=0.01)
    except AssertionError:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        raise AssertionError("processes left behind after the test: " +
                             "; ".join(f"{pid} {cmd}" for pid, cmd in sorted(left.items())))


def rlock_env(server=None, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLOCK_") or k == "RLOCK_BIN"}
    env.pop("RLOCK_BIN", None)
    if server is not None:
        env["RLOCK_REDIS_URL"] = server.url
    env.update(extra)
    return env


def run_rlock(args, server=None, env=None, timeout=60, input=None, **kw):
    """Runs rlock to the end; returns CompletedProcess with text stdout/stderr."""
    return subprocess.run([RLOCK] + list(args), env=env or rlock_env(server), timeout=timeout,
                          capture_output=True, text=True, input=input, **kw)


# Runs argv[2:] and writes its peak RSS (kB, getrusage's ru_maxrss) to the file argv[1].
MEASURE = """import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(args, peak_file, env, timeout=120, **kw):
    """Runs rlock ARGS to its end, its peak RSS written to PEAK_FILE: (CompletedProcess, the
    peak in kB). rlock is started by a small process of its own (MEASURE), since a child forked
    from a test would count the test's memory, before its exec, in its peak; that process's own
    8 MB (Python without site) still count, a floor under every peak."""
    r = subprocess.run([sys.executable, "-S", "-c", MEASURE, peak_file, RLOCK] + list(args),
                       env=env, timeout=timeout, **kw)
    with open(peak_file) as f:
        return r, int(f.read())


def start_rlock(args, server=None, env=None, **kw):
    """Starts rlock in a session of its own (so tests can signal its group); returns Popen."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([RLOCK] + list(args), env=env or rlock_env(server), text=True,
                            start_new_session=True, **kw)


def pid_alive(pid, program=None):
    """True while PID exists and is not a zombie; with PROGRAM, only while PID runs the
    executable of that name (pids wrap at 32768 here: a long suite reuses a dead one's)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        return program is None or os.path.basename(os.readlink(f"/proc/{pid}/exe")) == program
    except (FileNotFoundError, ProcessLookupError, PermissionError):  # gone meanwhile
        return False


def append_output(server, keys, *pieces, end=""):
    """output_append.lua as Redis gets it from the output's sender (the build's lua/, with what
    it uses), for run 7 keeping 1000 bytes: KEYS its stream, index and, optionally, last-output
    and attempts keys; PIECES (offset, stdout text); END the end's offset ('' for none). Its
    reply."""
    with open(os.path.join(BUILD_DIR, "lua", "output_append.lua")) as f:
        script = f.read()
    args = ["7", "1000", "0", end, "exited", "0", "0"]
    for offset, text in pieces:
        args += [str(offset), "o", text]
    return server.cmd("EVAL", script, str(len(keys)), *keys, *args)


def write_report(name, lines, heading=None):
    """LINES (a test module's figures) to $RLOCK_BUILD_DIR/NAME, when there are some."""
    build = os.environ.get("RLOCK_BUILD_DIR")
    if not build or not lines:
        return
    with open(os.path.join(build, name), "w") as f:
        if heading:
            f.write(heading + "\n")
        f.writelines(line + "\n" for line in lines)


def guardian_of(rlock_pid):
    """(pid, process group) of RLOCK_PID's guardian, the child of rlock named rlock-guardian."""
    def find():
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{entry}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if int(fields[1]) == rlock_pid and comm == "rlock-guardian":
                return int(entry), int(fields[2])
        return None
    return wait_until(find, 10, "rlock's guardian")


def read_pids(path):
    try:
        with open(path) as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        return []


def stop_procs(procs):
    """Kills what is left of PROCS (each started in a session of its own) and closes pipes."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        for stream in (p.stdout, p.stderr):
            if stream:
                stream.close()


def start_cluster(*args, replicas=0):
    """Three masters (redis-servers with ARGS too), each with REPLICAS replicas, made one Redis
    Cluster by redis-cli --cluster create, once every node says cluster_state:ok and every
    replica is in sync. The masters come first in the list, then the replicas."""
    nodes = [RedisServer("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", *args)
             for _ in range(3 * (1 + replicas))]
    r = subprocess.run([server_binary("cli") or "redis-cli", "--cluster", "create"] +
                       [f"127.0.0.1:{n.port}" for n in nodes] +
                       ["--cluster-replicas", str(replicas), "--cluster-yes"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        for n in nodes:
            n.stop()
        raise RuntimeError("redis-cli --cluster create failed: " + r.stdout + r.stderr)
    for n in nodes:
        wait_until(lambda: "cluster_state:ok" in n.cmd("CLUSTER", "INFO"), 20, "cluster ok")
    for n in nodes[3:]:
        wait_until(lambda: "master_link_status:up" in n.cmd("INFO", "replication"), 20,
                   "a replica in sync")
    return nodes


def cluster_owner(nodes, key):
    """The master of NODES that holds KEY's hash slot."""
    slot = nodes[0].cmd("CLUSTER", "KEYSLOT", key)
    for start, end, master, *_ in nodes[0].cmd("CLUSTER", "SLOTS"):
        if start <= slot <= end:
            return next(n for n in nodes if n.port == master[1])
    raise AssertionError(f"no owner for slot {slot}")


def migrate_slot(nodes, slot, source, destination, batch=20):
    """Moves hash SLOT of the cluster NODES from SOURCE to DESTINATION as redis-cli --cluster
    reshard does: IMPORTING on the destination, MIGRATING on the source, its keys MIGRATEd
    BATCH at a time, then SETSLOT NODE on the destination, the source and the others. Returns
    (start, end) on the monotonic clock: while the slot was in migration."""
    src_id, dst_id = source.cmd("CLUSTER", "MYID"), destination.cmd("CLUSTER", "MYID")
    s, d = source.client(), destination.client()
    try:
        start = time.monotonic()
        d("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        s("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        while True:
            keys = s("CLUSTER", "GETKEYSINSLOT", slot, batch)
            if not keys:
                break
            s("MIGRATE", "127.0.0.1", destination.port, "", 0, 5000, "KEYS", *keys)
        d("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        s("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        for n in nodes:
            if n is not source and n is not destination:
                n.cmd("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        return start, time.monotonic()
    finally:
        s.close()
        d.close()


def key_per_master(nodes):
    """{port: key}: a key c:N on each master of the cluster NODES."""
    keys = {}
    for i in range(1000):
        keys.setdefault(cluster_owner(nodes, f"c:{i}").port, f"c:{i}")
        if len(keys) == len(nodes):
            return keys
    raise AssertionError("no key found for every master")


class RedisTestCase(unittest.TestCase):
    """One redis-server for the class, emptied before every test."""

    server_args = ()
    # Rules a test class adds to the documented ones, each a list (docs/REDIS.md "Least privilege"
    # names them: +config|get for watch's notifications).
    extra_acl = ()

    @classmethod
    def setUpClass(cls):
        cls.server = RedisServer(*cls.server_args)
        # rlock runs as a user made from docs/REDIS.md "Least privilege": a change that needs one
        # more command fails here.
        cls.server.restrict(documented_acl() + list(cls.extra_acl))

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        self.server.cmd("FLUSHALL")
        self.tmp = tempfile.mkdtemp(prefix="rlock-test-")
        self.procs = []
        # Cleanups run after tearDown (and the first added, last): nothing may outlive a test.
        self.addCleanup(assert_no_processes_left)

    def tearDown(self):
        stop_procs(self.procs)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def start(self, args, **kw):
        p = start_rlock(args, self.server, **kw)
        self.procs.append(p)
        return p

    def run_rlock(self, args, **kw):
        return run_rlock(args, self.server, **kw)

    def assert_no_lock(self, key):
        self.assertIsNone(self.server.cmd("GET", key), f"{key} was left behind in Redis")

    def wait_file(self, name, timeout=10):
        """Waits until file NAME in the test dir exists and is not empty; returns its text."""
        path = self.path(name)

        def ready():
            try:
                with open(path) as f:
                    text = f.read()
                return text if text.endswith("\n") else None
            except FileNotFoundError:
                return None
        return wait_until(ready, timeout, f"file {name}")


class BlackHole:
    """A TCP port that never answers, like a host behind a firewall that DROPs: a listening
    socket with backlog 0 whose accept queue is filled by a connection nobody accepts, so the
    kernel drops every further SYN and a connect hangs until its own timeout. hangs() proves
    it with a plain connect."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(0)
        self.port = self.listener.getsockname()[1]
        self.fillers = []
        for _ in range(16):
            filler = self._connect(0.5)
            if not filler:
                return
            self.fillers.append(filler)
        raise RuntimeError("the black hole's accept queue never filled")

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def _connect(self, timeout):
        s = socket.socket()
        s.settimeout(timeout)
        try:
            s.connect(("127.0.0.1", self.port))
            return s
        except TimeoutError:
            s.close()
            return None

    def hangs(self, timeout=0.5):
        """True when a plain connect is still unanswered after TIMEOUT seconds."""
        s = self._connect(timeout)
        if s:
            s.close()
        return s is None

    def close(self):
        for s in self.fillers + [self.listener]:
            s.close()


class DelayProxy:
    """A TCP proxy in front of a redis-server that delivers every reply DELAY seconds late
    (requests go through at once, so the server acts on them on time), and that can cut every
    connection right after delivering the next reply: arm() says when. After the cut it refuses
    connections. For lease properties: a lease counted from when a reply arrived instead of when
    its command was sent shows up as a command alive after the key expired on the server."""

    def __init__(self, target_port, delay):
        import selectors
        import threading
        self.target_port, self.delay = target_port, delay
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.armed = False
        self.cut_at = None      # monotonic time of the cut
        self.last_reply = None  # the bytes delivered just before the cut
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.listener, selectors.EVENT_READ)
        self._pairs = {}    # socket -> its peer
        self._pending = []  # [due, seq, client socket, bytes, cut after it]
        self._seq = 0
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def arm(self):
        """The next reply that arrives from the server is the last one delivered."""
        self.armed = True

    def close(self):
        self._stop = True
        self._thread.join(timeout=5)
        self._cut()

    def _cut(self):
        for s in list(self._pairs):
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()
        self._pairs.clear()
        if self.listener.fileno() >= 0:
            try:
                self._sel.unregister(self.listener)
            except (KeyError, ValueError):
                pass
            self.listener.close()

    def _loop(self):
        import heapq
        import selectors
        while not self._stop and self.cut_at is None:
            timeout = 0.05
            if self._pending:
                timeout = max(0.0, min(timeout, self._pending[0][0] - time.monotonic()))
            for key, _ in self._sel.select(timeout):
                s = key.fileobj
                if s is self.listener:
                    client, _ = self.listener.accept()
                    server = socket.create_connection(("127.0.0.1", self.target_port))
                    self._pairs[client], self._pairs[server] = server, client
                    self._sel.register(client, selectors.EVENT_READ, "client")
                    self._sel.register(server, selectors.EVENT_READ, "server")
                    continue
                if s not in self._pairs:
                    continue
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                peer = self._pairs[s]
                if not data:  # one side closed: close both
                    for x in (s, peer):
                        self._sel.unregister(x)
                        self._pairs.pop(x, None)
                        x.close()
                    continue
                if key.data == "client":
                    peer.sendall(data)
                else:
                    last, self.armed = self.armed, False
                    self._seq += 1
                    heapq.heappush(self._pending,
                                   [time.monotonic() + self.delay, self._seq, peer, data, last])
            now = time.monotonic()
            while self._pending and self._pending[0][0] <= now:
                _, _, client, data, last = heapq.heappop(self._pending)
                if client.fileno() >= 0:
                    try:
                        client.sendall(data)
                    except OSError:
                        pass
                if last:
                    self.last_reply = data
                    self.cut_at = time.monotonic()
                    self._cut()
                    break


class IdleClosingProxy:
    """A TCP relay in front of a server that closes a connection (both sides) once no byte
    went either way for IDLE seconds, as HAProxy in TCP mode does with `timeout client` and
    `timeout server`, and cloud load balancers do. closed counts the connections it closed.
    LAZY: it closes an idle connection only when the next bytes come, from either side,
    instead of passing them on: the worst case of a close that crosses a command, which the
    client learns of only after sending."""

    def __init__(self, target_port, idle=1.0, lazy=False):
        import selectors
        import threading
        self.target_port, self.idle, self.lazy = target_port, idle, lazy
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.closed = 0
        self.refusals = 0  # connections closed at what _passes() refused
        # While set, every connection is closed and new ones with it: a partition of this
        # relay's clients alone (the server and its other clients go on).
        self.refusing = False
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.listener, selectors.EVENT_READ)
        self._pairs = {}   # socket -> its peer
        self._active = {}  # client socket -> monotonic time of its last byte either way
        self._stop = False
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def close(self):
        self._stop = True
        self._thread.join(timeout=5)
        for s in list(self._pairs):
            s.close()
        self.listener.close()

    def _passes(self, client, from_client, data):
        """Whether DATA, on CLIENT's connection, goes on; else the connection is closed
        (CommandRefusingProxy, ReplyLosingProxy)."""
        return True

    def idle_for(self, seconds):
        """Whether every connection has been idle SECONDS at least (there is one at least)."""
        now = time.monotonic()
        active = list(self._active.values())
        return bool(active) and all(now - last >= seconds for last in active)

    def _drop(self, client):
        server = self._pairs.pop(client, None)
        self._pairs.pop(server, None)
        self._active.pop(client, None)
        for s in (client, server):
            if s is not None:
                self._sel.unregister(s)
                s.close()

    def _loop(self):
        import selectors
        while not self._stop:
            if self.refusing:
                for client in list(self._active):
                    self._drop(client)
            for key, _ in self._sel.select(0.02):
                s = key.fileobj
                if s is self.listener:
                    client, _ = self.listener.accept()
                    if self.refusing:
                        client.close()
                        continue
                    try:
                        server = socket.create_connection(("127.0.0.1", self.target_port))
                    except OSError:
                        client.close()
                        continue
                    self._pairs[client], self._pairs[server] = server, client
                    self._active[client] = time.monotonic()
                    self._sel.register(client, selectors.EVENT_READ, client)
                    self._sel.register(server, selectors.EVENT_READ, client)
                    continue
                client = key.data
                if client not in self._active:
                    continue
                if self.lazy and time.monotonic() - self._active[client] >= self.idle:
                    self.closed += 1
                    self._drop(client)
                    continue
                try:
                    data = s.recv(65536)
                    if data and not self._passes(client, s is client, data):
                        self.refusals += 1
                        self._drop(client)
                        continue
                    if data:
                        self._pairs[s].sendall(data)
                except OSError:
                    data = b""
                if data:
                    self._active[client] = time.monotonic()
                else:
                    self._drop(client)
            now = time.monotonic()
            for client, last in list(self._active.items()) if not self.lazy else ():
                if now - last >= self.idle:
                    self.closed += 1
                    self._drop(client)


class CommandRefusingProxy(IdleClosingProxy):
    """A relay that closes the connection when a client sends one of the commands REFUSED
    (upper case), passing on nothing of what came with it, as twemproxy (nutcracker) does with
    the commands it does not support (TIME, XADD, XREVRANGE, INFO ...). It parses each chunk's
    commands; rlock writes a pipeline in one call. Idle connections stay open."""

    def __init__(self, target_port, refused):
        self.refused = set(refused)
        super().__init__(target_port, idle=3600)

    def _passes(self, client, from_client, data):
        if not from_client:
            return True
        for name in re.findall(rb"\*\d+\r\n\$\d+\r\n([^\r]*)\r\n", data):
            if name.decode(errors="replace").upper() in self.refused:
                return False
        return True


class ReplyLosingProxy(IdleClosingProxy):
    """A relay that passes on to the server the first TIMES requests for which LOSE(data) is
    true, and then closes the connection instead of passing back the server's reply: commands
    the server ran whose reply the client never gets, as when a proxy, a credential rotation or
    CLIENT KILL closes a connection under them. lost counts them."""

    def __init__(self, target_port, lose, times=1):
        self.lose, self.times, self.lost, self._doomed = lose, times, 0, set()
        super().__init__(target_port, idle=3600)

    def _passes(self, client, from_client, data):
        if from_client:
            if self.lost < self.times and self.lose(data):
                self.lost += 1
                self._doomed.add(client)
            return True
        if client in self._doomed:
            self._doomed.discard(client)
            return False
        return True
