"""--metrics-file: Prometheus text that node_exporter's textfile collector reads, accumulated
across runs, written atomically; a bad path never fails the job."""
import math
import os
import re
import time
import unittest

from harness import RedisTestCase

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse_labels(text):
    out, at = {}, 0
    while at < len(text):
        m = LABEL.match(text, at)
        assert m, f"bad labels: {text!r}"
        out[m[1]] = re.sub(r'\\(.)', lambda e: "\n" if e[1] == "n" else e[1], m[2])
        at = m.end()
    return out


def parse_text_format(text):
    """Prometheus' text format, read strictly: {family: (type, [(name, labels, value)])}.
    Fails on any line that is not HELP, TYPE or a sample of the family TYPE'd last, and on a
    histogram whose buckets are not cumulative, in increasing order of le, +Inf last and equal
    to its _count."""
    families, current = {}, None
    assert text.endswith("\n"), "the last line is not ended"
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            assert name not in families, f"{name} TYPE'd twice"
            families[name] = (kind, [])
            current = name
            continue
        m = SAMPLE.match(line)
        assert m and current, f"not Prometheus text: {line!r}"
        kind = families[current][0]
        allowed = [current + s for s in ("_bucket", "_sum", "_count")] if kind == "histogram" \
            else [current]
        assert m[1] in allowed, f"{m[1]} under the TYPE of {current}"
        value = float(m[3])
        assert not math.isnan(value) and (kind == "gauge" or value >= 0), line
        families[current][1].append((m[1], parse_labels(m[2]), value))
    for name, (kind, samples) in families.items():
        if kind != "histogram":
            continue
        series = {}
        for sample, labels, value in samples:
            rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
            series.setdefault(rest, {"buckets": []})
            if sample.endswith("_bucket"):
                series[rest]["buckets"].append((float(labels["le"]), value))
            else:
                series[rest][sample[len(name) + 1:]] = value
        for rest, s in series.items():
            bounds = [b for b, _ in s["buckets"]]
            counts = [c for _, c in s["buckets"]]
            assert bounds == sorted(bounds) and bounds[-1] == math.inf, (name, rest, bounds)
            assert counts == sorted(counts), (name, rest, counts)
            assert counts[-1] == s["count"] and "sum" in s, (name, rest)
    return families


def parse(path):
    """{(name, key, result): value} of the counters and gauges in the file at PATH."""
    with open(path) as f:
        families = parse_text_format(f.read())
    return {(name, labels["key"], labels.get("result") or labels.get("end")): value
            for kind, samples in families.values() if kind != "histogram"
            for name, labels, value in samples}


def histogram(path, family, key):
    """{le: count} and the sum of FAMILY's histogram for KEY."""
    with open(path) as f:
        kind, samples = parse_text_format(f.read())[family]
    assert kind == "histogram"
    mine = [(n, labels, v) for n, labels, v in samples if labels["key"] == key]
    buckets = {float(labels["le"]): v for n, labels, v in mine if n.endswith("_bucket")}
    total = next(v for n, _, v in mine if n.endswith("_sum"))
    return buckets, total


class Metrics(RedisTestCase):
    def test_runs_accumulate(self):
        path = self.path("rlock.prom")
        self.assertEqual(self.run_rlock(["run", "--metrics-file", path, "k", "--", "sleep", "0.3"]).returncode, 0)
        first = parse(path)
        self.assertEqual(first[("rlock_acquisitions_total", "k", "acquired")], 1)
        self.assertGreaterEqual(first[("rlock_hold_seconds_total", "k", None)], 0.3)
        self.assertEqual(self.run_rlock(["run", "--metrics-file", path, "k", "--", "true"]).returncode, 0)
        self.server.cmd("SET", "k", "other", "PX", 60000)
        self.assertEqual(self.run_rlock(["run", "--metrics-file", path, "k", "--", "true"]).returncode, 75)
        m = parse(path)
        self.assertEqual(m[("rlock_acquisitions_total", "k", "acquired")], 2)
        self.assertEqual(m[("rlock_acquisitions_total", "k", "busy")], 1)
        self.assertEqual(m[("rlock_losses_total", "k", None)], 0)
        with open(path) as f:
            text = f.read()
        self.assertIn("# TYPE rlock_acquisitions_total counter", text)
        self.assertFalse(os.path.exists(path + ".tmp"))  # renamed into place

    def test_histograms_of_wait_and_run_time_and_the_last_success(self):
        path = self.path("rlock.prom")
        before = time.time()
        for job in ("sleep 1.2", "true", "exit 3"):
            self.run_rlock(["run", "--metrics-file", path, "k", "--", "sh", "-c", job])
        after = time.time()
        m = parse(path)
        self.assertEqual(m[("rlock_runs_total", "k", "success")], 2)
        self.assertEqual(m[("rlock_runs_total", "k", "failure")], 1)
        last = m[("rlock_last_success_timestamp_seconds", "k", None)]
        self.assertTrue(before + 1.2 <= last <= after, (before, last, after))
        # Runs: one of more than a second, two of less (buckets count the runs at or below).
        runs, held = histogram(path, "rlock_run_duration_seconds", "k")
        self.assertEqual((runs[1], runs[5], runs[math.inf]), (2, 3, 3))
        self.assertAlmostEqual(held, m[("rlock_hold_seconds_total", "k", None)])
        # A waiter: between 0.5 s and 5 s of waiting, behind a holder that gives the lock back.
        holder = self.start(["run", "k", "--", "sleep", "1"])
        from harness import wait_until
        wait_until(lambda: self.server.cmd("GET", "k"), 10, "the holder")
        r = self.run_rlock(["run", "--metrics-file", path, "--wait", "20s", "k", "--", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(holder.wait(timeout=10), 0)
        waits, waited = histogram(path, "rlock_wait_duration_seconds", "k")
        self.assertEqual(waits[math.inf], 4)  # every run that got the lock
        self.assertEqual(waits[5] - waits[0.5], 1)  # ... one of which waited for it
        self.assertGreater(waited, 0.5)
        # A failure after it leaves the gauge where the last success put it; busy adds no run.
        gauge = parse(path)[("rlock_last_success_timestamp_seconds", "k", None)]
        self.run_rlock(["run", "--metrics-file", path, "k", "--", "false"])
        self.server.cmd("SET", "k", "other", "PX", 60000)
        self.assertEqual(self.run_rlock(["run", "--metrics-file", path, "k", "--", "true"])
                         .returncode, 75)
        m = parse(path)
        self.assertEqual(m[("rlock_last_success_timestamp_seconds", "k", None)], gauge)
        self.assertEqual(m[("rlock_runs_total", "k", "failure")], 2)
        self.assertEqual(histogram(path, "rlock_run_duration_seconds", "k")[0][math.inf], 5)

    def test_a_hung_run_is_counted_by_how_it_ended(self):
        path = self.path("rlock.prom")
        r = self.run_rlock(["run", "--metrics-file", path, "--heartbeat-file", self.path("beat"),
                            "--stale-after", "200ms", "k", "--", "sleep", "30"])
        self.assertEqual(r.returncode, 79, r.stderr)
        m = parse(path)
        self.assertEqual(m[("rlock_runs_total", "k", "hung")], 1)
        self.assertNotIn(("rlock_last_success_timestamp_seconds", "k", None), m)

    def test_losses_renewals_and_errors_are_counted(self):
        path = self.path("rlock.prom")
        p = self.start(["run", "--metrics-file", path, "--ttl", "600ms", "k", "--", "sleep", "30"])
        from harness import wait_until
        wait_until(lambda: self.server.cmd("GET", "k"), 5, "lock taken")
        import time
        time.sleep(0.5)  # let a renewal or two happen: what the counter counts
        self.server.cmd("SET", "k", "stolen")
        self.assertEqual(p.wait(timeout=20), 76)
        m = parse(path)
        self.assertEqual(m[("rlock_losses_total", "k", None)], 1)
        self.assertGreaterEqual(m[("rlock_renewals_total", "k", None)], 1)
        from harness import free_port
        r = self.run_rlock(["run", "--metrics-file", path, "--redis",
                            f"redis://127.0.0.1:{free_port()}", "k", "--", "true"])
        self.assertEqual(r.returncode, 69)
        self.assertEqual(parse(path)[("rlock_acquisitions_total", "k", "error")], 1)

    def test_an_unwritable_path_warns_and_the_job_still_runs(self):
        path = self.path("no-such-dir/rlock.prom")
        r = self.run_rlock(["run", "--metrics-file", path, "k", "--", "sh", "-c", "exit 3"])
        self.assertEqual(r.returncode, 3)
        self.assertIn("--metrics-file", r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assert_no_lock("k")
        # Also under -q, which a cron line has: a run that is never monitored is said.
        r = self.run_rlock(["run", "-q", "--metrics-file", path, "k", "--", "true"])
        self.assertEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("--metrics-file", r.stderr)
        self.assertFalse(os.path.exists(path))



class JsonLogs(RedisTestCase):
    def events(self, stderr):
        import json
        out = []
        for line in stderr.splitlines():
            e = json.loads(line)  # every line is one JSON object
            for field in ("time", "level", "event", "message"):
                self.assertIn(field, e)
            self.assertRegex(e["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            out.append(e)
        return out

    def test_every_event_is_one_json_line(self):
        r = self.run_rlock(["run", "-v", "--log-format", "json", "--ttl", "300ms", "k", "--",
                            "sleep", "0.35"])
        self.assertEqual(r.returncode, 0, r.stderr)
        events = self.events(r.stderr)
        names = [e["event"] for e in events]
        self.assertEqual(names[0], "acquired")
        self.assertEqual(events[0]["key"], "k")
        self.assertEqual(events[0]["fence"], int(self.server.cmd("GET", "{k}:rlock:fence")))
        self.assertIn("renewed", names)
        self.assertEqual(names[-1], "released")
        self.server.cmd("SET", "k", "other\n\"quoted\"", "PX", 60000)
        r = self.run_rlock(["run", "--log-format", "json", "k", "--", "true"])
        self.assertEqual(r.returncode, 75)
        busy = self.events(r.stderr)
        self.assertEqual([e["event"] for e in busy], ["busy"])
        self.assertEqual(busy[0]["level"], "info")
        self.assertGreater(busy[0]["ttl_ms"], 0)

    def test_a_loss_is_an_error_event(self):
        from harness import wait_until
        p = self.start(["run", "--log-format", "json", "--ttl", "600ms", "k", "--", "sleep", "30"])
        wait_until(lambda: self.server.cmd("GET", "k"), 5, "lock taken")
        self.server.cmd("DEL", "k")
        self.assertEqual(p.wait(timeout=20), 76)
        events = self.events(p.stderr.read())
        lost = [e for e in events if e["event"] == "lost"]
        self.assertEqual(len(lost), 1)
        self.assertEqual(lost[0]["level"], "error")


if __name__ == "__main__":
    unittest.main()
