#!/usr/bin/env python3
"""rlock's peak memory with --keep-output: what `rlock run --keep-output SIZE` holds at most
while a command writes 200 MB through it. A benchmark, not a test.

    bench/keep_output_peak.py [--rlock build/rlock] [--before OLD] [--mb 200] [--rounds 3]
                              [--sizes 1M,4M,16M] [--out bench/results.md]

Each writer runs under `rlock run --keep-output SIZE`, its stdout to /dev/null:
- zeros: `head -c N /dev/zero`, as fast as a program can write;
- text: `base64 /dev/urandom | head -c N`, lines of random text, slower;
- two streams: lines of 40 bytes, one to stdout and the next to stderr, each written on its own
  (awk, flushing every line), stdout and stderr leading to two places: rlock reads two pipes,
  a line at a time, and keeps where the stream changes, every 40 bytes. Slower (10 MB/s), so a
  fifth of N.
Each against Redis as it is (fast), and against a slow one: while the command runs, the
redis-server is stopped (SIGSTOP) for 1.5 s of every 2 s, which a send waits out, as it would a
Redis that is busy or far away.

rlock is started by GNU time (`/usr/bin/time -f %M`, Debian's package `time`), which reads its
peak RSS from wait4()'s ru_maxrss: the largest of rlock and the processes it waited for (`sh`,
`head`, `base64` and `awk` take 2 MB or less). Not by a Python process: a child forked from one
counts the parent's 8 MB or more, before its exec, in its peak. Printed: the largest of ROUNDS
runs, in MiB, beside the goal of docs/PERFORMANCE.md "Kept output" (2 × SIZE + 8 MB), and the
same writers without --keep-output; with --before, an older binary's beside. Also written to
its section of bench/results.md (or --out).
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from keep_output import start_server  # noqa: E402
from sections import write_section  # noqa: E402

TIME = "/usr/bin/time"

UNITS = {"k": 1 << 10, "M": 1 << 20}


def size_bytes(text):
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def writers(nbytes):
    lines = nbytes // 5 // 80
    return {
        "zeros": f"head -c {nbytes} /dev/zero",
        "text": f"base64 /dev/urandom | head -c {nbytes}",
        "two streams": f"awk 'BEGIN {{ for (i = 0; i < {lines}; i++) {{ "
                       f"print \"{'a' * 39}\"; fflush(); "
                       f"print \"{'b' * 39}\" > \"/dev/stderr\"; fflush(\"/dev/stderr\") }} }}'",
    }


class Staller:
    """Stops the redis-server PROC for STOPPED of every PERIOD seconds, until stopped itself."""

    def __init__(self, proc, stopped=1.5, period=2.0):
        self.proc, self.stopped, self.period = proc, stopped, period
        self.end = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self):
        while not self.end.wait(self.period - self.stopped):
            os.kill(self.proc.pid, signal.SIGSTOP)
            self.end.wait(self.stopped)
            os.kill(self.proc.pid, signal.SIGCONT)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.end.set()
        self.thread.join()
        os.kill(self.proc.pid, signal.SIGCONT)


def peak_kb(rlock, args, env, work, stderr_to):
    """rlock ARGS to its end, its stdout to /dev/null: its peak RSS in kB."""
    peak_file = os.path.join(work, "peak")
    with open(os.devnull, "wb") as null, open(stderr_to, "wb") as err:
        r = subprocess.run([TIME, "-q", "-f", "%M", "-o", peak_file, rlock] + args, env=env,
                           stdout=null, stderr=err, timeout=600)
    if r.returncode != 0:
        with open(stderr_to, "rb") as f:
            tail = f.read()[-2000:].decode(errors="replace")
        raise SystemExit(f"rlock {' '.join(args)}: exit {r.returncode}: {tail}")
    with open(peak_file) as f:
        return int(f.read())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rlock", default=os.path.join(HERE, "..", "build", "rlock"))
    ap.add_argument("--before", help="an older rlock binary, measured beside (taking turns)")
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--sizes", default="1M,4M,16M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--writers", default="zeros,text,two streams")
    ap.add_argument("--redis", default="fast,slow", help="fast, slow or both")
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    a = ap.parse_args()
    if not os.access(TIME, os.X_OK):
        raise SystemExit(f"{TIME} is needed (Debian's package time)")
    binaries = [("rlock", os.path.abspath(a.rlock))]
    if a.before:
        binaries.append(("before", os.path.abspath(a.before)))
    version = subprocess.run([a.redis_server, "--version"], capture_output=True,
                             text=True).stdout.split()[2]
    work = tempfile.mkdtemp(prefix="rlock-peak-")
    proc, port, client = start_server(a.redis_server, work)
    env = dict(os.environ, RLOCK_REDIS_URL=f"redis://127.0.0.1:{port}")
    jobs = writers(a.mb * 1_000_000)
    stderr_to = os.path.join(work, "stderr")
    rows = []  # (writer, Redis, SIZE, {binary: peak kB}, goal kB)

    def largest(args, mode):
        """Each binary's largest peak over the rounds, the binaries taking turns."""
        peaks = {name: 0 for name, _ in binaries}
        for _ in range(a.rounds):
            for name, binary in binaries:
                if mode == "slow":
                    with Staller(proc):
                        peak = peak_kb(binary, args, env, work, stderr_to)
                else:
                    peak = peak_kb(binary, args, env, work, stderr_to)
                peaks[name] = max(peaks[name], peak)
        return peaks

    try:
        for writer in a.writers.split(","):
            command = ["bench:peak", "--", "sh", "-c", jobs[writer]]
            rows.append((writer, "fast", "none", largest(["run"] + command, "fast"), None))
            for mode in a.redis.split(","):
                for size in a.sizes.split(","):
                    peaks = largest(["run", "--keep-output", size] + command, mode)
                    rows.append((writer, mode, size, peaks, 2 * size_bytes(size) + 8_000_000))
                    print(rows[-1], file=sys.stderr, flush=True)
    finally:
        client.close()
        proc.kill()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    mib = lambda kb: f"{kb / 1024:.1f} MiB"  # noqa: E731
    lines = [
        f"### Peak RSS with --keep-output (redis-server {version}, {time.strftime('%Y-%m-%d')})",
        "",
        f"`rlock run --keep-output SIZE` over {a.mb} MB (two streams: a fifth), its stdout to "
        f"/dev/null; Redis fast, or slow (stopped 1.5 s of every 2 s); the largest peak RSS of "
        f"{a.rounds} runs (GNU time's %M), the binaries taking turns. Goal: 2 × SIZE + 8 MB.",
        "",
        "| writer | Redis | --keep-output | " + " | ".join(n for n, _ in binaries) + " | goal |",
        "|---|---|---|" + "---|" * len(binaries) + "---|",
    ]
    for writer, mode, size, peaks, goal in rows:
        cells = [mib(peaks[n]) + (" (over)" if goal and peaks[n] * 1024 > goal else "")
                 for n, _ in binaries]
        lines.append(f"| {writer} | {mode if goal else '-'} | {size} | " + " | ".join(cells) +
                     f" | {mib(goal / 1024) if goal else ''} |")
    text = "\n".join(lines)
    print(text)
    write_section(a.out, "keep_output_peak", text)


if __name__ == "__main__":
    main()
