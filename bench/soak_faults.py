#!/usr/bin/python3
"""A long soak of the randomized fault run (tests/integration/test_random_faults.py).

Three keys raced by two or three simulated hosts each while a seeded nemesis picks fault after
fault (holders, guardians and whole jobs SIGSTOPped, rlock SIGKILLed, Redis frozen, paused,
restarted with and without data, connections killed, keys deleted or broken, one host's
replies delayed); then the same checks as the CI run. It prints one line per fault, then the
figures: runs, faults by kind, overlaps by cause, and every problem found.

  bench/soak_faults.py                       # 10 minutes of faults, a fresh seed
  bench/soak_faults.py --duration 3m --seed 42
  bench/soak_faults.py --cluster --duration 10m
                                             # six Cluster nodes: masters killed, restarted,
                                             # failed over
  bench/soak_faults.py --kinds key-del --undocument key-del --duration 20s
                                             # a mutant check: the checker must fail

A soak, not a test: exit status 0 when nothing was found, 1 otherwise. Needs redis-server and a
built tree (build/rlock, build/tests/rlock_fault_section, or --rlock and --section).
"""
import argparse
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
INTEGRATION = os.path.join(ROOT, "tests", "integration")


def duration(text):
    """Seconds from 90, 90s, 10m or 1h."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(s|m|h)?", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (90, 90s, 10m, 1h)")
    return float(m.group(1)) * {None: 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=duration, default=600,
                    help="length of the fault phase (default 10m)")
    ap.add_argument("--seed", type=int, help="replay a run's schedule (default: a fresh one)")
    ap.add_argument("--rlock", default=os.environ.get("RLOCK_BIN")
                    or os.path.join(ROOT, "build", "rlock"))
    ap.add_argument("--section", default=os.environ.get("RLOCK_FAULT_SECTION")
                    or os.path.join(ROOT, "build", "tests", "rlock_fault_section"))
    ap.add_argument("--kinds", help="comma-separated fault kinds to draw from (default all "
                    "of the mode)")
    ap.add_argument("--cluster", action="store_true",
                    help="a Redis Cluster of three masters with a replica each: its masters "
                    "killed, restarted and failed over, beside the holder faults")
    ap.add_argument("--undocument", action="append", default=[], metavar="KIND",
                    help="mutant check: count KIND's overlaps as undocumented (may repeat)")
    ap.add_argument("--report", help="also write the summary to this file")
    ap.add_argument("--quiet", action="store_true", help="no line per fault")
    args = ap.parse_args()

    # The test module reads these when it is imported.
    os.environ["RLOCK_BIN"] = os.path.abspath(args.rlock)
    os.environ["RLOCK_FAULT_SECTION"] = os.path.abspath(args.section)
    sys.path.insert(0, INTEGRATION)
    import test_random_faults as rf  # noqa: E402

    kinds = [k for k in (args.kinds or "").split(",") if k] or None
    for name in (kinds or []) + args.undocument:
        if name not in rf.KINDS:
            ap.error(f"unknown fault kind {name!r}; known: {', '.join(sorted(rf.KINDS))}")
    for name in args.undocument:
        rf.KINDS[name].documented = None
        rf.KINDS[name].note = "NOT documented (made so by --undocument: a mutant check)"

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    run = rf.RandomRun(seed, args.duration, kinds,
                       say=(lambda *a: None) if args.quiet else lambda s: print(s, flush=True),
                       cluster=args.cluster)
    try:
        res = run.run()
    finally:
        run.close()
    text = rf.report(res)
    print(text, end="")
    if args.report:
        with open(args.report, "w") as f:
            f.write(text)
    return 1 if res["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
