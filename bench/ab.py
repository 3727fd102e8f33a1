#!/usr/bin/env python3
"""Start-up A/B: two rlock binaries, `rlock run KEY -- true` against a private redis-server,
interleaved run by run so that both see the same machine. A benchmark, not a test.

    bench/ab.py BEFORE AFTER [--runs 2000]

Prints each binary's median and mean wall time per run and the median of the paired
differences (AFTER - BEFORE) with the spread of that median over ten blocks of runs: a
difference inside that spread is noise. With --flock, `true` and `flock FILE true` take their
turns too, and each binary's time added over `true` is given as a multiple of flock's
(docs/PERFORMANCE.md).
"""
import argparse
import os
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_once(binary, env, argv=None):
    argv = argv or [binary, "run", "ab:startup", "--", "/bin/true"]
    start = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, env)
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter_ns() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{binary} failed (status {status})")
    return elapsed / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--flock", action="store_true",
                        help="also `true` and `flock FILE true`, for the ratio to flock")
    args = parser.parse_args()
    others = {}  # with --flock: wall times of `true` and of `flock FILE true`
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                                   "--appendonly", "no", "--dir", tmp],
                                  stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while subprocess.run(["redis-cli", "-p", str(port), "ping"],
                                 capture_output=True).stdout != b"PONG\n":
                if time.monotonic() > deadline:
                    raise SystemExit("redis-server did not start")
                time.sleep(0.01)
            env = {"PATH": "/usr/bin:/bin", "RLOCK_REDIS_URL": f"redis://127.0.0.1:{port}",
                   "HOME": tmp}
            for b in (args.before, args.after):  # warm the page cache
                for _ in range(20):
                    run_once(b, env)
            a, b = [], []
            if args.flock:
                others = {"true": (["/bin/true"], []),
                          "flock": (["/usr/bin/flock", os.path.join(tmp, "ab.flock"),
                                     "/bin/true"], [])}
            for i in range(args.runs):
                for argv, times in others.values():
                    times.append(run_once(argv[0], env, argv))
                # Alternate which goes first, so neither always follows the other.
                if i % 2:
                    a.append(run_once(args.before, env))
                    b.append(run_once(args.after, env))
                else:
                    b.append(run_once(args.after, env))
                    a.append(run_once(args.before, env))
        finally:
            server.terminate()
            server.wait()
    diffs = [y - x for x, y in zip(a, b)]
    block = len(diffs) // 10
    block_medians = [statistics.median(diffs[i * block:(i + 1) * block]) for i in range(10)]
    print(f"runs: {args.runs} each, interleaved")
    for name, xs in (("before", a), ("after", b)):
        print(f"{name:7} median {statistics.median(xs):.3f} ms  mean {statistics.mean(xs):.3f} ms")
    print(f"after - before: median {statistics.median(diffs):+.3f} ms "
          f"(blocks of {block}: {min(block_medians):+.3f} .. {max(block_medians):+.3f} ms)")
    if others:
        true_ms = statistics.median(others["true"][1])
        flock_added = statistics.median(others["flock"][1]) - true_ms
        print(f"true    median {true_ms:.3f} ms; flock adds {flock_added:.3f} ms")
        for name, xs in (("before", a), ("after", b)):
            added = statistics.median(xs) - true_ms
            print(f"{name:7} adds {added:.3f} ms: {added / flock_added:.2f} x flock's")


if __name__ == "__main__":
    main()
