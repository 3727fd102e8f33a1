#!/usr/bin/python3
"""rlock against the tools people use today, side by side in one run on loopback.

  (1) overhead of `X true` over `true`
  (2) handoff latency with 8 waiters queued behind a holder and 50 ms critical sections
  (3) Redis commands per second per waiting client while the holder holds
  (4) peak RSS of rlock while holding

A benchmark, not a test: it prints one table and writes its section of bench/results.md (or
--out; bench/footprint.py writes another).
Run with Debian's /usr/bin/python3 (for python3-redis). Needs redis-server, redis-cli, flock,
cc, and for the etcd column etcd-server and etcd-client.
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sections import write_section  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RELEASE_LUA = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
               "return redis.call('del', KEYS[1]) else return 0 end")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, timeout=10):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.01)


class Env:
    def __init__(self, rlock):
        self.rlock = os.path.abspath(rlock)
        self.dir = tempfile.mkdtemp(prefix="rlock-bench-")
        self.stamp = os.path.join(self.dir, "stamp")
        subprocess.run(["cc", "-O2", "-o", self.stamp, os.path.join(HERE, "stamp.c")], check=True)
        self.port = free_port()
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir], stdout=subprocess.DEVNULL)
        wait_for(lambda: self.cli("PING").strip() == "PONG")
        self.etcd = None
        if shutil.which("etcd") and shutil.which("etcdctl"):
            self.etcd_port = free_port()
            peer = free_port()
            self.etcd = subprocess.Popen(
                ["etcd", "--data-dir", os.path.join(self.dir, "etcd"),
                 "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                 "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                 "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-cluster", f"default=http://127.0.0.1:{peer}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for(lambda: subprocess.run(self.etcdctl(["endpoint", "health"]),
                                            capture_output=True).returncode == 0, 20)

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True,
                              text=True).stdout

    def etcdctl(self, args):
        return ["etcdctl", f"--endpoints=127.0.0.1:{self.etcd_port}", *args]

    def env(self):
        e = dict(os.environ)
        e["RLOCK_REDIS_URL"] = f"redis://127.0.0.1:{self.port}"
        e["ETCDCTL_API"] = "3"
        return e

    def close(self):
        for p in (self.redis, self.etcd):
            if p:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def section_commands(env, tool, key, path, ms):
    """The command line that runs one critical section under TOOL, waiting for the lock."""
    stamp = [env.stamp, path, str(ms)]
    if tool == "rlock":
        return [env.rlock, "run", "-q", "-w", "120s", key, "--", *stamp]
    if tool == "flock":
        return ["flock", os.path.join(env.dir, key + ".flock"), *stamp]
    if tool == "etcdctl lock":
        return env.etcdctl(["lock", key, *stamp])
    if tool == "redis-py Lock":
        return ["/usr/bin/python3", os.path.join(HERE, "redis_py_section.py"), str(env.port), key,
                env.stamp, path, str(ms)]
    if tool == "redis-cli script":
        # The common recipe: SET NX PX in a retry loop, then a compare-and-delete script.
        port = env.port
        script = (f't=$$-$(date +%N); until [ "$(redis-cli -p {port} SET {key} $t NX PX 30000)" = OK ]; '
                  f'do sleep 0.05; done; {" ".join(stamp)}; '
                  f'redis-cli -p {port} EVAL "{RELEASE_LUA}" 1 {key} $t >/dev/null')
        return ["sh", "-c", script]
    raise ValueError(tool)


def true_command(env, tool):
    if tool == "true":
        return ["true"]
    if tool == "rlock":
        return [env.rlock, "run", "-q", "bench:overhead", "--", "true"]
    if tool == "flock":
        return ["flock", os.path.join(env.dir, "overhead.flock"), "true"]
    if tool == "etcdctl lock":
        return env.etcdctl(["lock", "overhead", "true"])
    if tool == "redis-py Lock":
        return ["/usr/bin/python3", "-c",
                "import redis,subprocess; l=redis.Redis(port=%d).lock('bench:py', timeout=30); "
                "l.acquire(); subprocess.run(['true']); l.release()" % env.port]
    if tool == "redis-cli script":
        port = env.port
        return ["sh", "-c", f'redis-cli -p {port} SET bench:cli t NX PX 30000 >/dev/null; true; '
                            f'redis-cli -p {port} EVAL "{RELEASE_LUA}" 1 bench:cli t >/dev/null']
    raise ValueError(tool)


def overhead_ms(env, tools, runs):
    """Median wall time of `X true` per tool, in ms. The tools take turns run by run, so that
    the machine's ups and downs fall on all of them alike."""
    times = {tool: [] for tool in tools}
    for i in range(runs):
        for tool in tools:
            if tool in ("etcdctl lock", "redis-py Lock") and i % 5:
                continue  # slow tools: every fifth round is plenty
            t = time.perf_counter()
            subprocess.run(true_command(env, tool), env=env.env(), stdout=subprocess.DEVNULL)
            times[tool].append(time.perf_counter() - t)
    return {tool: statistics.median(ts) * 1000 for tool, ts in times.items()}


def handoff_round(env, tool, waiters, ms, r):
    """One holder and WAITERS waiters run a section each; returns the WAITERS handoffs (ms)."""
    path = os.path.join(env.dir, f"{tool.replace(' ', '_')}-{r}.log")
    key = f"bench-{tool.split()[0].replace('-', '')}-{r}"
    procs = [subprocess.Popen(section_commands(env, tool, key, path, ms), env=env.env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(waiters + 1)]
    for p in procs:
        p.wait(timeout=300)
    with open(path) as f:
        stamps = [line.split() for line in f]
    # Sections never overlap (each tool is a lock), so the stamps alternate start, end.
    events = [int(t) for _, t in stamps]
    kinds = [k for k, _ in stamps]
    assert kinds == ["start", "end"] * (waiters + 1), f"{tool}: sections overlapped"
    return [(events[2 * i] - events[2 * i - 1]) / 1e6 for i in range(1, waiters + 1)]


def handoffs_ms(env, tools, waiters, ms, rounds):
    """Handoffs per tool; the tools take turns round by round."""
    out = {tool: [] for tool in tools}
    for r in range(rounds):
        for tool in tools:
            out[tool] += handoff_round(env, tool, waiters, ms, r)
    return out


def commands_per_waiter(env, tool, waiters, window):
    """Redis commands per second per waiter while a holder holds, over WINDOW seconds."""
    key = f"bench-load-{tool.split()[0].replace('-', '')}"
    path = os.path.join(env.dir, "load.log")
    hold_ms = int((window + 3) * 1000)
    holder = subprocess.Popen(section_commands(env, tool, key, path, hold_ms), env=env.env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: os.path.exists(path))
    procs = [subprocess.Popen(section_commands(env, tool, key, path, 1), env=env.env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(waiters)]
    time.sleep(1.0)  # let every waiter start and settle into its waiting
    env.cli("CONFIG", "RESETSTAT")
    time.sleep(window)
    stats = env.cli("INFO", "commandstats")
    calls = sum(int(line.split("calls=")[1].split(",")[0]) for line in stats.splitlines()
                if line.startswith("cmdstat_") and not line.startswith(("cmdstat_config",
                                                                         "cmdstat_info")))
    # The holder renews (rlock) once per ttl/3; count it in, as the waiters' doing it is not.
    for p in [holder] + procs:
        p.wait(timeout=120)
    os.unlink(path)
    return calls / waiters / window


def peak_rss_kb(env):
    p = subprocess.Popen([env.rlock, "run", "-q", "bench:rss", "--", "sleep", "1"], env=env.env())
    time.sleep(0.5)
    peak = 0
    with open(f"/proc/{p.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    p.wait()
    return peak


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rlock", default=os.path.join(HERE, "..", "build", "rlock"))
    parser.add_argument("--out", default=os.path.join(HERE, "results.md"))
    parser.add_argument("--runs", type=int, default=200, help="runs per overhead figure")
    parser.add_argument("--rounds", type=int, default=8, help="rounds of 9 sections per tool")
    args = parser.parse_args()

    env = Env(args.rlock)
    try:
        tools = ["rlock", "flock", "redis-cli script", "redis-py Lock"]
        if env.etcd:
            tools.insert(2, "etcdctl lock")
        over = overhead_ms(env, ["true"] + tools, args.runs)
        base = over["true"]
        hand = handoffs_ms(env, tools, 8, 50, args.rounds)
        rows = []
        for tool in tools:
            load = ("n/a" if tool in ("flock", "etcdctl lock")
                    else f"{commands_per_waiter(env, tool, 8, 5):.2f}")
            h = hand[tool]
            rows.append((tool, over[tool] - base, statistics.median(h), percentile(h, 0.9), max(h),
                         load))
            print(f"  {tool}: done", file=sys.stderr)
        rss = peak_rss_kb(env)
    finally:
        env.close()

    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores ({cpu}), loopback,"
        f" redis-server {subprocess.run(['redis-server', '--version'], capture_output=True, text=True).stdout.split()[2]}.",
        f"Overhead: median of `X true` minus `true` ({base:.2f} ms), the tools taking turns run by"
        f" run. Handoff: 8 waiters behind"
        f" a holder, 50 ms sections, {args.rounds * 8} handoffs, monotonic stamps at each"
        f" section's start and end. Load: Redis commands per second per waiter while the holder"
        f" holds, over 5 s.",
        "",
        "| tool | overhead over `true` (ms) | handoff p50 (ms) | handoff p90 (ms) | handoff max (ms) | commands/s per waiter |",
        "|---|---|---|---|---|---|",
    ]
    for tool, over, p50, p90, mx, load in rows:
        lines.append(f"| {tool} | {over:.2f} | {p50:.2f} | {p90:.2f} | {mx:.2f} | {load} |")
    lines.append("")
    lines.append(f"Peak RSS of `rlock run` while holding: {rss / 1024:.1f} MB.")
    table = "\n".join(lines) + "\n"
    print(table)
    write_section(args.out, "startup", table)


if __name__ == "__main__":
    main()
