#!/usr/bin/python3
"""What rlock leaves in a shared Redis, and what `rlock list` costs among unrelated keys.

  (1) footprint: N distinct keys locked once each (`rlock run KEY -- true`); Redis used_memory
      before, after, and after --retention has passed; the memory of one key's fence counter
      and of its history at 1, 100 and 1000 entries
  (2) list: 10 locks held among M unrelated string keys (and 100 values of 1 MiB): the time of
      `rlock list` (median of 5), the values it reads (GET calls, INFO commandstats) and the
      bytes the server sends (total_net_output_bytes)

A benchmark, not a test. It writes its section of bench/results.md (or --out). With --before
BINARY, the list scenario also runs an older rlock for comparison.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sections import write_section  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rlock-footprint-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--enable-debug-command", "yes"],
            stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while self.cli("PING") != "PONG":
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.02)
        self.url = f"redis://127.0.0.1:{self.port}"

    def cli(self, *args):
        r = subprocess.run(["redis-cli", "-p", str(self.port), *map(str, args)],
                           capture_output=True, text=True)
        return r.stdout.strip()

    def info(self, section):
        out = {}
        for line in self.cli("INFO", section).splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def used_memory(self):
        self.cli("MEMORY", "PURGE")
        return int(self.info("memory")["used_memory"])

    def calls(self, command):
        stat = self.info("commandstats").get(f"cmdstat_{command}", "calls=0")
        return int(stat.split(",")[0].split("=")[1])

    def output_bytes(self):
        return int(self.info("stats")["total_net_output_bytes"])

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def kb(n):
    return f"{n / 1024:.1f} kB"


def footprint(rlock, n, retention_s, workers):
    server = Server()
    env = dict(os.environ, RLOCK_REDIS_URL=server.url)
    try:
        before = server.used_memory()

        def lock_once(i):
            subprocess.run([rlock, "run", "--retention", f"{retention_s}s", f"bench:{i}", "--",
                            "true"], env=env, check=True)

        started = time.monotonic()
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lock_once, range(n)))
        took = time.monotonic() - started
        if took >= retention_s:
            raise RuntimeError(f"locking took {took:.0f} s, past the retention: give --retention")
        after = server.used_memory()
        keys_after = int(server.cli("DBSIZE"))
        last = f"bench:{n - 1}"
        fence = int(server.cli("MEMORY", "USAGE", "{" + last + "}:rlock:fence"))
        history_1 = int(server.cli("MEMORY", "USAGE", "{" + last + "}:rlock:history"))
        # Wait out the retention (a benchmark may sleep), then let expiry catch up.
        time.sleep(retention_s + 1)
        deadline = time.monotonic() + 120
        while int(server.cli("DBSIZE")) > 0 and time.monotonic() < deadline:
            server.cli("SCAN", "0", "COUNT", "10000")  # lazy expiry helps the active cycle along
            time.sleep(0.5)
        gone = server.used_memory()
        keys_gone = int(server.cli("DBSIZE"))

        # One key's history at 100 and 1000 entries (the default length).
        sizes = {}
        for length in (100, 1000):
            key = f"hist:{length}"
            for _ in range(length):
                subprocess.run([rlock, "run", "--history-length", str(length), key, "--", "true"],
                               env=env, check=True)
            sizes[length] = int(server.cli("MEMORY", "USAGE", "{" + key + "}:rlock:history"))
        return {"n": n, "took": took, "before": before, "after": after, "keys_after": keys_after,
                "gone": gone, "keys_gone": keys_gone, "fence": fence, "history_1": history_1,
                "history": sizes, "retention": retention_s}
    finally:
        server.stop()


def list_cost(binaries, m, big):
    server = Server()
    env = dict(os.environ, RLOCK_REDIS_URL=server.url)
    holders = []
    try:
        server.cli("DEBUG", "POPULATE", m, "unrelated", 20)
        server.cli("DEBUG", "POPULATE", big, "big", 1024 * 1024)
        rlock = binaries[0][1]
        for i in range(10):
            holders.append(subprocess.Popen([rlock, "run", f"lock:{i}", "--", "sleep", "600"],
                                            env=env, stdout=subprocess.DEVNULL))
        deadline = time.monotonic() + 10
        while int(server.cli("EXISTS", *[f"lock:{i}" for i in range(10)])) < 10:
            if time.monotonic() > deadline:
                raise RuntimeError("the holders did not start")
            time.sleep(0.02)
        rows = []
        for name, binary in binaries:
            times = []
            for _ in range(5):
                gets, out = server.calls("get"), server.output_bytes()
                started = time.monotonic()
                r = subprocess.run([binary, "list"], env=env, capture_output=True, text=True)
                times.append(time.monotonic() - started)
                gets, out = server.calls("get") - gets, server.output_bytes() - out
                found = len([line for line in r.stdout.splitlines() if line.startswith("lock:")])
            rows.append((name, statistics.median(times), found, gets, out))
        return {"m": m, "big": big, "dbsize": int(server.cli("DBSIZE")), "rows": rows}
    finally:
        for p in holders:
            p.terminate()
            p.wait()
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rlock", default=os.path.join(HERE, "..", "build", "rlock"))
    parser.add_argument("--before", help="an older rlock binary, for the list scenario")
    parser.add_argument("--keys", type=int, default=100_000, help="keys locked once (footprint)")
    parser.add_argument("--unrelated", type=int, default=1_000_000, help="unrelated keys (list)")
    parser.add_argument("--retention", type=int, default=240,
                        help="seconds (footprint); longer than locking every key takes")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(HERE, "results.md"))
    args = parser.parse_args()
    rlock = os.path.abspath(args.rlock)
    version = subprocess.run(["redis-server", "--version"], capture_output=True,
                             text=True).stdout.split()[2]

    f = footprint(rlock, args.keys, args.retention, args.workers)
    binaries = [("rlock", rlock)] + ([("rlock before", os.path.abspath(args.before))]
                                     if args.before else [])
    ls = list_cost(binaries, args.unrelated, 100)

    lines = [
        f"### Footprint and `list` (redis-server {version}, {time.strftime('%Y-%m-%d')})",
        "",
        f"{f['n']:,} distinct keys locked once each (`rlock run --retention {f['retention']}s KEY"
        f" -- true`, {args.workers} at a time, {f['took']:.0f} s):",
        "",
        "| | used_memory | keys |",
        "|---|---|---|",
        f"| before | {f['before'] / 2**20:.1f} MiB | 0 |",
        f"| after the runs | {f['after'] / 2**20:.1f} MiB | {f['keys_after']:,} |",
        f"| after the retention | {f['gone'] / 2**20:.1f} MiB | {f['keys_gone']:,} |",
        "",
        f"Per lock key: fence counter {f['fence']} B, history with one run {kb(f['history_1'])},"
        f" with 100 runs (the default --history-length) {kb(f['history'][100])}, with 1000 runs"
        f" (--history-length 1000) {kb(f['history'][1000])} (MEMORY USAGE); used_memory grew"
        f" {kb((f['after'] - f['before']) / f['n'])} per key locked once.",
        "",
        f"`rlock list` with 10 locks held among {ls['dbsize']:,} keys ({ls['m']:,} unrelated"
        f" strings of 20 bytes, {ls['big']} of 1 MiB), median of 5:",
        "",
        "| binary | time | locks found | values read (GET) | bytes sent by Redis |",
        "|---|---|---|---|---|",
    ]
    for name, took, found, gets, out in ls["rows"]:
        lines.append(f"| {name} | {took:.2f} s | {found} | {gets:,} | {out / 2**20:.1f} MiB |")
    text = "\n".join(lines) + "\n"
    print(text)
    write_section(args.out, "footprint", text)


if __name__ == "__main__":
    main()
