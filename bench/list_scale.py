#!/usr/bin/python3
"""What `rlock list` costs at scale: N locks held, the time and peak memory of `rlock list` and
`rlock list --json`, and the commands the server ran per lock.

The locks are made directly, not by N rlock processes: one real `rlock acquire` gives a value
of the current format, and N copies of it with their own tokens and fences are written with a
pipelined SET each, beside the fence counter by which list finds a lock (`{KEY}:rlock:fence`).
With --holders local (the default, the worst case) each names this host, this boot and a live
pid, so list reads /proc for every holder to tell it runs; with --holders remote each names
another host, as most of a fleet's locks would be. Each size gets a private redis-server.

A benchmark, not a test. Prints a table and writes its section of bench/results.md (or
--out). With --before BINARY, an older rlock is measured beside this one, the two taking turns.
"""
import argparse
import os
import re
import secrets
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from footprint import Server  # noqa: E402
from sections import write_section  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def resp(*args):
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def populate(server, rlock, n, ttl_ms, remote):
    """N locks bench:0 ... bench:N-1, held (a value of rlock's format) for TTL_MS, on this host
    or, REMOTE, on another."""
    env = dict(os.environ, RLOCK_REDIS_URL=server.url)
    subprocess.run([rlock, "acquire", "--ttl", "1h", "bench:template"], env=env, check=True,
                   capture_output=True)
    template = server.cli("GET", "bench:template")
    server.cli("DEL", "bench:template", "{bench:template}:rlock:fence")
    if not template.startswith("rlock/1 "):
        raise RuntimeError(f"unexpected value {template!r}")
    if remote:
        template = re.sub(r" host=\S+ ", " host=web-7 ", template)
    commands = []
    for i in range(n):
        value = re.sub(r"^rlock/1 [0-9a-f]{32} ", f"rlock/1 {secrets.token_hex(16)} ", template)
        value = re.sub(r" fence=\d+$", f" fence={i + 1}", value)
        commands.append(resp("SET", f"bench:{i}", value, "PX", ttl_ms))
        commands.append(resp("SET", "{" + f"bench:{i}" + "}:rlock:fence", i + 1))
    r = subprocess.run(["redis-cli", "-p", str(server.port), "--pipe"], input=b"".join(commands),
                       capture_output=True)
    if r.returncode != 0 or int(server.cli("DBSIZE")) != 2 * n:
        raise RuntimeError(f"populating failed: {r.stdout!r} {r.stderr!r}")


def commands_run(server):
    total = 0
    for line in server.cli("INFO", "commandstats").splitlines():
        m = re.match(r"cmdstat_(\w+):calls=(\d+)", line)
        if m and m.group(1) not in ("info", "config"):
            total += int(m.group(2))
    return total


def server_cpu(server):
    info = server.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def measure(server, binary, args, n):
    """One run of BINARY ARGS: (seconds, max RSS in MB, commands per lock, rlock's CPU seconds,
    the server's CPU seconds)."""
    env = dict(os.environ, RLOCK_REDIS_URL=server.url)
    server.cli("CONFIG", "RESETSTAT")
    cpu = server_cpu(server)
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S", binary, *args], env=env,
                       capture_output=True, text=True)
    cpu = server_cpu(server) - cpu
    if r.returncode != 0:
        raise RuntimeError(f"{binary} {args}: {r.returncode} {r.stderr[-500:]}")
    calls = commands_run(server)
    elapsed, rss_kb, user, system = r.stderr.strip().splitlines()[-1].split()
    found = r.stdout.count('"key":') if "--json" in args else len(r.stdout.splitlines())
    if found != n:
        raise RuntimeError(f"{binary} {args}: {found} locks listed, {n} held")
    return float(elapsed), int(rss_kb) / 1024, calls / n, float(user) + float(system), cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rlock", default=os.path.join(HERE, "..", "build", "rlock"))
    parser.add_argument("--before", help="an older rlock binary, measured beside")
    parser.add_argument("--sizes", default="50000,100000", help="numbers of locks")
    parser.add_argument("--runs", type=int, default=3, help="runs per binary and form (median)")
    parser.add_argument("--holders", choices=("local", "remote"), default="local",
                        help="the holders on this host (judged by /proc) or on another")
    parser.add_argument("--out", default=os.path.join(HERE, "results.md"))
    args = parser.parse_args()
    binaries = [("rlock", os.path.abspath(args.rlock))]
    if args.before:
        binaries.append(("rlock before", os.path.abspath(args.before)))
    version = subprocess.run(["redis-server", "--version"], capture_output=True,
                             text=True).stdout.split()[2]
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        server = Server()
        try:
            populate(server, binaries[0][1], n, 3_600_000, args.holders == "remote")
            for form in (["list"], ["list", "--json"]):
                got = {name: [] for name, _ in binaries}
                for _ in range(args.runs):
                    for name, binary in binaries:  # taking turns
                        got[name].append(measure(server, binary, form, n))
                for name, _ in binaries:
                    runs = got[name]
                    rows.append((n, " ".join(form), name,
                                 *(statistics.median(run[i] for run in runs) for i in range(5))))
                    print(rows[-1], flush=True)
        finally:
            server.stop()
    lines = [
        f"### `list` at scale, holders {'on this host' if args.holders == 'local' else 'elsewhere'}"
        f" (redis-server {version}, {time.strftime('%Y-%m-%d')})",
        "",
        f"N locks held (values of rlock's format, "
        + ("this host, a live pid: list reads /proc for each holder" if args.holders == "local"
           else "another host's") +
        f"), median of {args.runs}, the binaries taking turns: elapsed time, max RSS and CPU"
        " time (user + system) of rlock (`/usr/bin/time`), commands the server ran per lock"
        " (INFO commandstats) and its CPU time (INFO cpu).",
        "",
        "| locks | command | binary | time | max RSS | commands per lock | rlock CPU | server CPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, form, name, t, m, c, cpu, server_cpu_s in rows:
        lines.append(f"| {n:,} | `rlock {form}` | {name} | {t:.2f} s | {m:.0f} MB | {c:.1f} |"
                     f" {cpu:.2f} s | {server_cpu_s:.2f} s |")
    text = "\n".join(lines) + "\n"
    print(text)
    write_section(args.out, f"list_scale_{args.holders}", text)


if __name__ == "__main__":
    main()
