#!/usr/bin/python3
"""Redlock with masters that never answer: how long after rlock is invoked the command starts,
and rlock exits, when 2 of 5 masters are black-holed (and 1 of 3, listed first), beside the same
runs with every master answering; the rlock before the quorum fan-out (--before) and this one.

A black hole is a listening socket whose accept queue is full (backlog 0, filled by one
connection nobody accepts): the kernel drops every further SYN, as a firewall's DROP would, and
a connect hangs until its timeout (--connect-timeout at its default, 2 s). The command is
bench/stamp.c, which writes the monotonic clock when it starts.

A benchmark, not a test: it prints a table and writes its section of bench/results.md (or --out).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sections import write_section  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# Which masters answer (H) and which are black holes (B), in the order given to rlock.
LAYOUTS = ["HHHHH", "BHBHH", "HHH", "BHH"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(dir=tmp)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                if self.ping_ms() is not None:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("redis-server did not start")
            time.sleep(0.01)
        self.url = f"redis://127.0.0.1:{self.port}"

    def ping_ms(self, times=1):
        """The median round trip of TIMES PINGs on one connection, in ms."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            trips = []
            for _ in range(times):
                start = time.perf_counter()
                s.sendall(b"PING\r\n")
                if s.recv(64) != b"+PONG\r\n":
                    return None
                trips.append((time.perf_counter() - start) * 1000)
            return statistics.median(trips)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class BlackHole:
    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(0)
        self.url = f"redis://127.0.0.1:{self.listener.getsockname()[1]}"
        self.fillers = []
        while True:
            s = socket.socket()
            s.settimeout(0.5)
            try:
                s.connect(self.listener.getsockname())
            except TimeoutError:  # the queue is full: this SYN went unanswered
                s.close()
                return
            self.fillers.append(s)
            if len(self.fillers) > 16:
                raise SystemExit("the black hole's accept queue never filled")

    def close(self):
        for s in self.fillers + [self.listener]:
            s.close()


def run_once(binary, urls, stamp, tmp, key):
    """(ms to the command's start or None, ms to rlock's exit, exit status)."""
    mark = os.path.join(tmp, "mark")
    if os.path.exists(mark):
        os.unlink(mark)
    args = [binary, "run", "-q"]
    for url in urls:
        args += ["--redis", url]
    args += [key, "--", stamp, mark, "0"]
    env = {"PATH": "/usr/bin:/bin", "HOME": tmp}
    begin = time.monotonic_ns()
    pid = os.posix_spawn(binary, args, env)
    _, status = os.waitpid(pid, 0)
    end = time.monotonic_ns()
    started = None
    if os.path.exists(mark):
        with open(mark) as f:
            started = (int(f.readline().split()[1]) - begin) / 1e6
    return started, (end - begin) / 1e6, os.waitstatus_to_exitcode(status)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rlock", default=os.path.join(HERE, "..", "build", "rlock"))
    parser.add_argument("--before", default="/work/baseline/rlock",
                        help="the rlock before Redlock's quorum fan-out")
    parser.add_argument("--out", default=os.path.join(HERE, "results.md"))
    parser.add_argument("--runs", type=int, default=40, help="runs per cell")
    parser.add_argument("--slow-runs", type=int, default=3,
                        help="runs per cell whose first run takes over a second")
    args = parser.parse_args()
    binaries = [("before", os.path.abspath(args.before)), ("after", os.path.abspath(args.rlock))]

    with tempfile.TemporaryDirectory(prefix="rlock-bench-redlock-") as tmp:
        stamp = os.path.join(tmp, "stamp")
        subprocess.run(["cc", "-O2", "-o", stamp, os.path.join(HERE, "stamp.c")], check=True)
        servers = [Server(tmp) for _ in range(5)]
        holes = [BlackHole() for _ in range(2)]
        try:
            rtt = statistics.median(s.ping_ms(200) for s in servers)
            results = {}
            for layout in LAYOUTS:
                healthy, dark = iter(servers), iter(holes)
                urls = [next(healthy).url if c == "H" else next(dark).url for c in layout]
                for name, binary in binaries:
                    first = run_once(binary, urls, stamp, tmp, "bench:warm")
                    runs = args.slow_runs if first[1] > 1000 else args.runs
                    cell = [first] + [run_once(binary, urls, stamp, tmp, f"bench:{i}")
                                      for i in range(runs - 1)]
                    results[layout, name] = cell
                    print(f"  {layout} {name}: done", file=sys.stderr)
        finally:
            for x in servers + holes:
                x.close() if isinstance(x, BlackHole) else x.stop()

    version = subprocess.run(["redis-server", "--version"], capture_output=True,
                             text=True).stdout.split()[2]
    lines = [
        f"### Redlock with black-holed masters (redis-server {version},"
        f" {time.strftime('%Y-%m-%d')})",
        "",
        "`rlock run` over Redlock masters, some black-holed (a full accept queue: a connect"
        " hangs), `--connect-timeout` at its default 2 s; from invoking rlock to the command's"
        " start and to rlock's exit, median (max) of the runs. A PING's round trip to a"
        f" healthy master: {rtt:.3f} ms. before: rlock before the quorum fan-out; after: this"
        " tree.",
        "",
        "| masters (B = black hole) | binary | runs | exit | command started after (ms) |"
        " rlock exited after (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for layout in LAYOUTS:
        for name, _ in binaries:
            cell = results[layout, name]
            starts = [s for s, _, _ in cell if s is not None]
            exits = [e for _, e, _ in cell]
            codes = ",".join(str(c) for c in sorted({c for _, _, c in cell}))
            started = (f"{statistics.median(starts):.1f} ({max(starts):.1f})" if starts
                       else "never")
            if starts and len(starts) < len(cell):
                started += f", {len(cell) - len(starts)} never"
            lines.append(f"| {layout} | {name} | {len(cell)} | {codes} | {started} |"
                         f" {statistics.median(exits):.1f} ({max(exits):.1f}) |")
    table = "\n".join(lines) + "\n"
    print(table)
    write_section(args.out, "redlock", table)


if __name__ == "__main__":
    main()
