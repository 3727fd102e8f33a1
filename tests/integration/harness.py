"""Test harness: real redis-servers on free ports, the real rlock binary, deadlines not sleeps.

Nothing here mocks Redis. A missing redis-server is an error, never a skip.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

RLOCK = os.environ.get("RLOCK_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "rlock")
REDIS_SERVER = shutil.which("redis-server")


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

    def __init__(self, *extra_args):
        if not REDIS_SERVER:
            raise RuntimeError("redis-server is not installed; tests need a real Redis")
        self.dir = tempfile.mkdtemp(prefix="rlock-redis-")
        self.extra_args = list(extra_args)
        self.port = None
        self.proc = None
        self.start()

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
        return RedisClient(self.port)

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


def start_rlock(args, server=None, env=None, **kw):
    """Starts rlock in a session of its own (so tests can signal its group); returns Popen."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([RLOCK] + list(args), env=env or rlock_env(server), text=True,
                            start_new_session=True, **kw)


def pid_alive(pid):
    """True while PID exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or before the read
        return False


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


class RedisTestCase(unittest.TestCase):
    """One redis-server for the class, emptied before every test."""

    server_args = ()

    @classmethod
    def setUpClass(cls):
        cls.server = RedisServer(*cls.server_args)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def setUp(self):
        self.server.cmd("FLUSHALL")
        self.tmp = tempfile.mkdtemp(prefix="rlock-test-")
        self.procs = []

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
