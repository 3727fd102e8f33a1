#include <doctest/doctest.h>

#include "print/metrics.h"

using namespace rlock;

TEST_CASE("a run's counters, formatted and parsed back, add up across runs") {
  MetricSeries all;
  RunMetrics m{"job:\"a\"\\b\n", Acquisition::acquired, 1.5, 20.25, 3, 1, 0, "", 0};
  add_run(all, m);
  std::string text = format_metrics(all);
  CHECK(text.find("# TYPE rlock_acquisitions_total counter\n") != std::string::npos);
  // The key is a label: quote, backslash and newline escaped as Prometheus reads them.
  CHECK(text.find(
            "rlock_acquisitions_total{key=\"job:\\\"a\\\"\\\\b\\n\",result=\"acquired\"} 1\n") !=
        std::string::npos);
  MetricSeries again = parse_metrics(text);
  CHECK(again == all);
  add_run(again, m);
  m.result = Acquisition::busy;
  add_run(again, m);
  std::string twice = format_metrics(again);
  CHECK(twice.find("result=\"acquired\"} 2\n") != std::string::npos);
  CHECK(twice.find("result=\"busy\"} 1\n") != std::string::npos);
  CHECK(twice.find("rlock_hold_seconds_total{key=\"job:\\\"a\\\"\\\\b\\n\"} 60.75\n") !=
        std::string::npos);
}

TEST_CASE("parse_metrics drops what it cannot read and keeps the rest") {
  MetricSeries s = parse_metrics("# HELP x\n\ngarbage\nrlock_losses_total{key=\"k\"} 2\n"
                                 "rlock_losses_total{key=\"k\"} notanumber\n"
                                 "rlock_renewals_total{key=\"a b\"} 7\n");
  CHECK(s.size() == 2);
  CHECK(s["rlock_losses_total{key=\"k\"}"] == 2);
  CHECK(s["rlock_renewals_total{key=\"a b\"}"] == 7);
}

TEST_CASE("histograms: cumulative buckets in increasing order, +Inf last, per key") {
  MetricSeries all;
  // A key that looks like a label inside: its escaped quote keeps le apart.
  for (const char* key : {"b", "a\",le=\"1"}) {
    RunMetrics m{key, Acquisition::acquired, 0.2, 7, 0, 0, 0, "success", 1000.5};
    add_run(all, m);
    m.hold_seconds = 100;
    m.end = "failure";
    m.finished_at = 2000;
    add_run(all, m);
  }
  std::string text = format_metrics(all);
  std::string b = "rlock_run_duration_seconds_bucket{key=\"b\",le=\"";
  size_t at5 = text.find(b + "5\"} 0\n"), at15 = text.find(b + "15\"} 1\n"),
         at300 = text.find(b + "300\"} 2\n"), inf = text.find(b + "+Inf\"} 2\n"),
         sum = text.find("rlock_run_duration_seconds_sum{key=\"b\"} 107\n");
  REQUIRE(at5 != std::string::npos);
  REQUIRE(at15 != std::string::npos);
  REQUIRE(at300 != std::string::npos);
  REQUIRE(inf != std::string::npos);
  CHECK(at5 < at15);
  CHECK(at15 < at300);
  CHECK(at300 < inf);
  CHECK(inf < sum);
  CHECK(text.find("rlock_run_duration_seconds_bucket{key=\"a\\\",le=\\\"1\",le=\"+Inf\"} 2\n") !=
        std::string::npos);
  // The gauge is the last success's time, not a sum, and a failure does not move it.
  CHECK(text.find("rlock_last_success_timestamp_seconds{key=\"b\"} 1000.5\n") != std::string::npos);
  CHECK(parse_metrics(text) == all);
  // A clock set back: the gauge follows it (a time once in the future must not stick).
  add_run(all, RunMetrics{"b", Acquisition::acquired, 0, 1, 0, 0, 0, "success", 900});
  CHECK(all["rlock_last_success_timestamp_seconds{key=\"b\"}"] == 900);
  CHECK(all["rlock_runs_total{key=\"b\",end=\"success\"}"] == 2);
}
