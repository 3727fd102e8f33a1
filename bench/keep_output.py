#!/usr/bin/env python3
"""100 MB through `rlock run`, with and without --keep-output: the throughput the command sees,
and what keeping costs Redis. A benchmark, not a test.

    bench/keep_output.py [--rlock build/rlock] [--mb 100] [--rounds 7] [--keep 1M]

The command writes MB megabytes (`head -c N /dev/zero`, as fast as a program can) to stdout,
which leads to a file (tmpfs when /tmp is one, else the page cache), to a pipe read by a
program that does some work with it (`gzip -1`, as a mail or log shipper would), or to a pipe
read by `cat > /dev/null`, a reader that does nothing: the worst case for any relay, where
even `cat` in the middle costs 2.5 times the time (also measured). Each round runs the four variants in turn, so that all see the same
machine; the median wall time of each (from the shell, start to exit) gives its throughput, and
the ratio with/without is what docs/PERFORMANCE.md "Kept output" sets at 80% or more. Also:
Redis's CPU and commands per run with --keep-output, and the bytes it kept.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from harness import RedisClient, free_port  # noqa: E402


def start_server(binary, work):
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", work], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            return proc, port, RedisClient(port)
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("redis-server did not start")
            time.sleep(0.01)


def usage(client):
    """(Redis CPU seconds, commands run) so far."""
    cpu = calls = 0.0
    for line in client("INFO", "everything").splitlines():
        if line.startswith(("used_cpu_user:", "used_cpu_sys:")):
            cpu += float(line.split(":")[1])
        elif line.startswith("cmdstat_") and not line.startswith("cmdstat_info:"):
            calls += int(line.split("calls=")[1].split(",")[0])
    return cpu, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rlock", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                    "rlock"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--keep", default="1M")
    a = ap.parse_args()
    rlock = os.path.abspath(a.rlock)
    work = tempfile.mkdtemp(prefix="rlock-keep-")
    proc, port, client = start_server(a.redis_server, work)
    env = dict(os.environ, RLOCK_REDIS_URL=f"redis://127.0.0.1:{port}")
    nbytes = a.mb * 1_000_000
    job = f"head -c {nbytes} /dev/zero"
    out = os.path.join(work, "out")
    variants = {}
    dests = (("file", f"> {out}"), ("pipe to gzip -1", "| gzip -1 > /dev/null"),
             ("pipe to cat", "| cat > /dev/null"))
    for dest, redirect in dests:
        for keep in (False, True):
            flag = f"--keep-output {a.keep} " if keep else ""
            variants[(dest, keep)] = f'"{rlock}" run {flag}bench:keep -- {job} {redirect}'
    # Beside them, what a plain relay costs: `cat` between the command and its reader.
    relay = {False: f"{job} | cat > /dev/null", True: f"{job} | cat | cat > /dev/null"}
    times = {v: [] for v in variants}
    relay_times = {k: [] for k in relay}
    redis_cpu, redis_calls = [], []
    try:
        for _ in range(a.rounds):
            for v, line in variants.items():
                before = usage(client)
                start = time.monotonic()
                r = subprocess.run(["bash", "-o", "pipefail", "-c", line], env=env,
                                   stderr=subprocess.PIPE, text=True)
                times[v].append(time.monotonic() - start)
                after = usage(client)
                if r.returncode != 0:
                    raise SystemExit(f"{line}: exit {r.returncode}: {r.stderr}")
                if v[1]:
                    redis_cpu.append(after[0] - before[0])
                    redis_calls.append(after[1] - before[1] - 1)  # less our INFO
            for k, line in relay.items():
                start = time.monotonic()
                subprocess.run(["bash", "-o", "pipefail", "-c", line], check=True)
                relay_times[k].append(time.monotonic() - start)
        kept = 0
        for member in client("ZRANGE", "rlock-output:{bench:keep}:rlock:outputs", "-1", "-1"):
            stream = "rlock-output:{bench:keep}:rlock:output-" + member.split()[0]
            kept = sum(len(e[1][1]) for e in client("XRANGE", stream, "-", "+")
                       if e[1][0] in ("o", "e"))
    finally:
        client.close()
        proc.kill()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{a.mb} MB through rlock run, median of {a.rounds} (redis-server on loopback, "
          f"--keep-output {a.keep})\n")
    print("| destination | without | with --keep-output | throughput with / without |")
    print("|---|---|---|---|")
    for dest, _ in dests:
        without = statistics.median(times[(dest, False)])
        with_ = statistics.median(times[(dest, True)])
        print(f"| {dest} | {without * 1000:.0f} ms ({a.mb / without:.0f} MB/s) | "
              f"{with_ * 1000:.0f} ms ({a.mb / with_:.0f} MB/s) | {without / with_ * 100:.0f}% |")
    bare, relayed = (statistics.median(relay_times[k]) for k in (False, True))
    print(f"| (no rlock) pipe to cat, and through a second cat | {bare * 1000:.0f} ms | "
          f"{relayed * 1000:.0f} ms | {bare / relayed * 100:.0f}% |")
    print(f"\nRedis per run with --keep-output: {statistics.median(redis_cpu) * 1000:.1f} ms CPU, "
          f"{statistics.median(redis_calls):.0f} commands; kept {kept} bytes")


if __name__ == "__main__":
    main()
