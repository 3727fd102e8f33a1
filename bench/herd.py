#!/usr/bin/env python3
"""The herd at :00: what rlock costs one redis-server, per invocation and in a herd. A
benchmark, not a test.

    bench/herd.py [--rlock build/rlock] [--processes 2000] [--runs 300]

First, one invocation at a time (RUNS of each, the kinds taking turns), Redis's CPU per
invocation (INFO cpu: used_cpu_user + used_cpu_sys, read before and after each) and commands
(INFO commandstats, those run inside scripts included), beside `redis-cli SET KEY v NX PX 1`,
which opens a connection of its own as rlock does:
  - busy skip: `rlock run -n KEY -- true` on a key another rlock holds (exit 75);
  - period skip: `rlock run --once-per hour KEY -- true` once the hour's run is done (75);
  - free run: `rlock run KEY -- true` on a free key (acquire, release, history; exit 0).
Then herds: PROCESSES invocations started at once through `xargs -P`, on one key and over
50 keys, with and without --once-per hour: runs per key, exits by status, and Redis's CPU and
commands per invocation. The ratios to redis-cli are what docs/PERFORMANCE.md "The herd at :00"
sets goals for.
"""
import argparse
import collections
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


class Server:
    """A private redis-server and one connection of ours to it, for INFO."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="rlock-herd-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--maxclients", "10000"],
            stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.cmd = RedisClient(self.port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("redis-server did not start")
                time.sleep(0.01)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def usage(self):
        """(Redis CPU seconds, commands run) so far; our own INFO calls are not counted."""
        info = self.cmd("INFO", "everything")
        cpu = calls = 0.0
        for line in info.splitlines():
            if line.startswith(("used_cpu_user:", "used_cpu_sys:")):
                cpu += float(line.split(":")[1])
            elif line.startswith("cmdstat_") and not line.startswith("cmdstat_info:"):
                calls += int(line.split("calls=")[1].split(",")[0])
        return cpu, calls

    def close(self):
        self.cmd.close()
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def cpu(server):
    info = server.cmd("INFO", "cpu")
    return sum(float(line.split(":")[1]) for line in info.splitlines()
               if line.startswith(("used_cpu_user:", "used_cpu_sys:")))


def one_at_a_time(server, variants, env, rounds):
    """Each of VARIANTS ({name: argv}) run ROUNDS times, one invocation at a time, the variants
    taking turns so that all see the same machine: per variant, Redis's CPU (us) per
    invocation (median and mean of each invocation's, less what our own INFO costs), its
    commands per invocation, and the exit statuses."""
    def run(argv):
        return subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode
    commands = {}
    for name, argv in variants.items():
        calls0 = server.usage()[1]
        for _ in range(20):
            run(argv)
        commands[name] = (server.usage()[1] - calls0) / 20
    samples = {name: [] for name in variants}
    idle = []
    exits = {name: collections.Counter() for name in variants}
    for _ in range(rounds):
        before = cpu(server)
        idle.append(cpu(server) - before)
        for name, argv in variants.items():
            before = cpu(server)
            exits[name][run(argv)] += 1
            samples[name].append(cpu(server) - before)
    own = statistics.median(idle)
    return {name: (statistics.median(v) * 1e6 - own * 1e6, (statistics.mean(v) - own) * 1e6,
                   commands[name], exits[name]) for name, v in samples.items()}


def herd(server, rlock, env, processes, keys, once_per, tag):
    """PROCESSES rlock runs started at once through xargs -P, over KEYS keys."""
    period = ["--once-per", "hour"] if once_per else []
    lines = "".join(f"herd:{tag}:{i % keys}\n" for i in range(processes))
    script = f'"{rlock}" run {" ".join(period)} "$0" -- true 2>/dev/null; echo "$0 $?"'
    cpu0, calls0 = server.usage()
    start = time.monotonic()
    r = subprocess.run(["xargs", "-P", str(processes), "-n", "1", "sh", "-c", script],
                       input=lines, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    cpu1, calls1 = server.usage()
    exits = collections.Counter()
    runs = collections.Counter()
    for line in r.stdout.splitlines():
        key, status = line.rsplit(" ", 1)
        exits[int(status)] += 1
        if status == "0":
            runs[key] += 1
    return {
        "exits": dict(sorted(exits.items())),
        "runs_per_key": sorted(collections.Counter(runs.values()).items()),
        "keys_without_run": keys - len(runs),
        "cpu_us": (cpu1 - cpu0) * 1e6 / processes,
        "commands": (calls1 - calls0) / processes,
        "seconds": elapsed,
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rlock", default=os.path.join(here, "..", "build", "rlock"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server"))
    ap.add_argument("--redis-cli", default=shutil.which("redis-cli"))
    ap.add_argument("--runs", type=int, default=300, help="of each, one at a time")
    ap.add_argument("--processes", type=int, default=2000, help="in each herd")
    args = ap.parse_args()
    rlock = os.path.abspath(args.rlock)
    server = Server(args.redis_server)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RLOCK_REDIS_URL": server.url,
           "HOME": server.dir, "RLOCK_HOSTNAME": "bench"}
    holder = subprocess.Popen([rlock, "run", "busy", "--", "sleep", "3600"], env=env)
    try:
        while server.cmd("EXISTS", "busy") != 1:
            time.sleep(0.01)
        subprocess.run([rlock, "run", "--once-per", "hour", "done", "--", "true"], env=env,
                       check=True)
        for argv in ([rlock, "run", "-n", "busy", "--", "true"],
                     [rlock, "run", "free", "--", "true"]):  # warm: page cache, script cache
            for _ in range(20):
                subprocess.run(argv, env=env, stderr=subprocess.DEVNULL)
        variants = {
            "redis-cli SET NX PX": [args.redis_cli, "-p", str(server.port), "SET", "cli", "v",
                                    "NX", "PX", "1"],
            "busy skip (run -n, held)": [rlock, "run", "-n", "busy", "--", "true"],
            "period skip (--once-per, done)": [rlock, "run", "--once-per", "hour", "done", "--",
                                               "true"],
            "free run (acquire, release, history)": [rlock, "run", "free", "--", "true"],
        }
        rows = one_at_a_time(server, variants, env, args.runs)
        base, base_mean = rows["redis-cli SET NX PX"][:2]
        version = server.cmd("INFO", "server").split("redis_version:")[1].split()[0]
        print(f"one at a time, {args.runs} of each, taking turns (Redis {version}); Redis CPU "
              "per invocation, median (mean):")
        print(f"  {'':40} {'CPU us':>15} {'x cli':>13} {'commands':>9}  exits")
        for name, (median, mean, calls, exits) in rows.items():
            print(f"  {name:40} {median:6.1f} ({mean:6.1f}) {median / base:5.2f} "
                  f"({mean / base_mean:5.2f}) {calls:9.1f}  {dict(exits)}")
        print(f"herds of {args.processes} through xargs -P:")
        for keys, once_per in ((1, True), (1, False), (50, True), (50, False)):
            h = herd(server, rlock, env, args.processes, keys, once_per,
                     f"{keys}{'p' if once_per else ''}")
            label = f"{keys} key{'s' if keys > 1 else ''}" + (", --once-per hour" if once_per
                                                            else ", -n")
            print(f"  {label:24} exits {h['exits']}, runs per key {h['runs_per_key']}"
                  f"{', keys without a run: %d' % h['keys_without_run'] if h['keys_without_run'] else ''}; "
                  f"Redis {h['cpu_us']:.0f} us CPU and {h['commands']:.1f} commands per "
                  f"invocation ({h['cpu_us'] / base:.2f} x cli); {h['seconds']:.1f} s")
    finally:
        holder.terminate()
        holder.wait()
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
