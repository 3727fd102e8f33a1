"""--metrics-file: Prometheus text that node_exporter's textfile collector reads, accumulated
across runs, written atomically; a bad path never fails the job."""
import os
import re
import unittest

from harness import RedisTestCase

LINE = re.compile(r'^(rlock_[a-z_]+)\{key="([^"]*)"(?:,result="([a-z]+)")?\} ([0-9.e+-]+)$')


def parse(path):
    """{(name, key, result): value}, failing on any line that is not comment or sample."""
    out = {}
    with open(path) as f:
        for line in f.read().splitlines():
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                continue
            m = LINE.match(line)
            assert m, f"not Prometheus text: {line!r}"
            out[(m[1], m[2], m[3])] = float(m[4])
    return out


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


if __name__ == "__main__":
    unittest.main()


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
