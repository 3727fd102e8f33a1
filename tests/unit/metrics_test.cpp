#include <doctest/doctest.h>

#include "metrics.h"

using namespace rlock;

TEST_CASE("a run's counters, formatted and parsed back, add up across runs") {
  MetricSeries all;
  RunMetrics m{"job:\"a\"\\b\n", "acquired", 1.5, 20.25, 3, 1, 0};
  add_run(all, m);
  std::string text = format_metrics(all);
  CHECK(text.find("# TYPE rlock_acquisitions_total counter\n") != std::string::npos);
  // The key is a label: quote, backslash and newline escaped as Prometheus reads them.
  CHECK(text.find("rlock_acquisitions_total{key=\"job:\\\"a\\\"\\\\b\\n\",result=\"acquired\"} 1\n") !=
        std::string::npos);
  MetricSeries again = parse_metrics(text);
  CHECK(again == all);
  add_run(again, m);
  m.result = "busy";
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
