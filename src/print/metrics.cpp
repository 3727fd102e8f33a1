#include "print/metrics.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <tuple>
#include <vector>

#include "util/error.h"
#include "util/fd.h"
#include "util/trusted_file.h"

namespace rlock {

namespace {

enum class Type { counter, gauge, histogram };

struct Family {
  const char* name;
  Type type;
  const char* help;
};

// Every family, in the order the file lists them.
constexpr Family k_families[] = {
    {"rlock_acquisitions_total", Type::counter,
     "Lock acquisitions by result (acquired, busy, done: --once-per found this period done, "
     "error)."},
    {"rlock_runs_total", Type::counter,
     "Runs of the command by how they ended (success, failure, signalled, lost, max-run, hung)."},
    {"rlock_last_success_timestamp_seconds", Type::gauge,
     "When this host's last successful run (exit 0) ended, in Unix seconds."},
    {"rlock_wait_duration_seconds", Type::histogram,
     "Seconds waited for the lock, by runs that got it."},
    {"rlock_run_duration_seconds", Type::histogram,
     "Seconds the lock was held for a run of the command."},
    {"rlock_wait_seconds_total", Type::counter, "Seconds spent waiting for the lock."},
    {"rlock_hold_seconds_total", Type::counter, "Seconds the lock was held."},
    {"rlock_renewals_total", Type::counter, "Successful lease renewals."},
    {"rlock_renewal_failures_total", Type::counter, "Failed lease renewal attempts."},
    {"rlock_losses_total", Type::counter, "Locks lost while the command ran."},
    {"rlock_cpu_seconds_total", Type::counter,
     "CPU seconds the command and the processes it started used, by mode (user, system)."},
    {"rlock_last_run_max_rss_bytes", Type::gauge,
     "The largest resident set among the processes of this host's last run of the command."},
};

const char* type_name(Type t) {
  switch (t) {
  case Type::counter: return "counter";
  case Type::gauge: return "gauge";
  case Type::histogram: return "histogram";
  }
  return "untyped";
}

// A label value as Prometheus writes it: backslash, quote and newline escaped.
std::string label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

// NAME{key="KEY"[,EXTRA]}: the key first, so that a series' other labels come after it.
std::string series(const std::string& name, const std::string& key, const std::string& extra = "") {
  std::string s = name + "{key=\"" + label(key) + "\"";
  if (!extra.empty()) s += "," + extra;
  return s + "}";
}

void observe(MetricSeries& s, const char* family, const std::string& key, double value,
             std::span<const double> buckets) {
  std::string name = family;
  for (double bound : buckets)
    s[series(name + "_bucket", key, "le=\"" + number(bound) + "\"")] += value <= bound ? 1 : 0;
  s[series(name + "_bucket", key, "le=\"+Inf\"")] += 1;
  s[series(name + "_sum", key)] += value;
  s[series(name + "_count", key)] += 1;
}

// Where a series goes in its family: by its labels but le, then buckets by bound, _sum, _count
// (Prometheus wants a histogram's buckets in increasing order, +Inf last).
struct Place {
  std::string labels;
  int part;  // 0 a bucket, 1 _sum, 2 _count (0 for counters and gauges)
  double le;
  bool operator<(const Place& o) const {
    return std::tie(labels, part, le) < std::tie(o.labels, o.part, o.le);
  }
};

// The family SERIES_NAME belongs to, and its place there; nullopt when it is none of F's.
std::optional<Place> place_in(const Family& f, const std::string& series_name) {
  size_t brace = series_name.find('{');
  std::string metric = series_name.substr(0, brace);
  std::string labels = brace == std::string::npos ? "" : series_name.substr(brace);
  if (f.type != Type::histogram) {
    if (metric != f.name) return std::nullopt;
    return Place{labels, 0, 0};
  }
  std::string name = f.name;
  if (metric == name + "_sum") return Place{labels, 1, 0};
  if (metric == name + "_count") return Place{labels, 2, 0};
  if (metric != name + "_bucket") return std::nullopt;
  // le is the last label: the key's value, escaped, cannot hold ,le=" unescaped.
  size_t le = labels.rfind(",le=\"");
  if (le == std::string::npos) return std::nullopt;
  std::string bound = labels.substr(le + 5, labels.size() - le - 7);
  double value = bound == "+Inf" ? std::numeric_limits<double>::infinity()
                                 : std::strtod(bound.c_str(), nullptr);
  return Place{labels.substr(0, le) + "}", 0, value};
}

const char* acquisition_name(Acquisition a) {
  switch (a) {
    case Acquisition::acquired: return "acquired";
    case Acquisition::busy: return "busy";
    case Acquisition::done: return "done";
    case Acquisition::error: break;
  }
  return "error";
}

}  // namespace

MetricSeries parse_metrics(const std::string& text) {
  MetricSeries out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    // The value follows the last space; label values may hold spaces, never a bare one at the
    // end.
    size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    try {
      out[line.substr(0, space)] += std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
      // not ours or damaged: dropped rather than carried on
    }
  }
  return out;
}

std::string format_metrics(const MetricSeries& all) {
  std::string out;
  for (const Family& f : k_families) {
    out += std::string("# HELP ") + f.name + " " + f.help + "\n";
    out += std::string("# TYPE ") + f.name + " " + type_name(f.type) + "\n";
    std::vector<std::pair<Place, std::string>> lines;
    for (const auto& [name, value] : all)
      if (auto place = place_in(f, name)) lines.emplace_back(*place, name + " " + number(value));
    std::sort(lines.begin(), lines.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [place, line] : lines) out += line + "\n";
  }
  return out;
}

void add_run(MetricSeries& s, const RunMetrics& m) {
  s[series("rlock_acquisitions_total", m.key,
           std::string("result=\"") + acquisition_name(m.result) + "\"")] += 1;
  s[series("rlock_wait_seconds_total", m.key)] += m.wait_seconds;
  s[series("rlock_hold_seconds_total", m.key)] += m.hold_seconds;
  s[series("rlock_renewals_total", m.key)] += static_cast<double>(m.renewals);
  s[series("rlock_renewal_failures_total", m.key)] += static_cast<double>(m.renewal_failures);
  s[series("rlock_losses_total", m.key)] += static_cast<double>(m.losses);
  if (m.result == Acquisition::acquired)
    observe(s, "rlock_wait_duration_seconds", m.key, m.wait_seconds, k_wait_buckets);
  if (m.cost_known) {
    s[series("rlock_cpu_seconds_total", m.key, "mode=\"user\"")] += m.cpu_user_seconds;
    s[series("rlock_cpu_seconds_total", m.key, "mode=\"system\"")] += m.cpu_system_seconds;
    s[series("rlock_last_run_max_rss_bytes", m.key)] = m.max_rss_bytes;
  }
  if (m.end.empty()) return;
  s[series("rlock_runs_total", m.key, "end=\"" + m.end + "\"")] += 1;
  observe(s, "rlock_run_duration_seconds", m.key, m.hold_seconds, k_run_buckets);
  // The latest success's time, as written: not the largest ever seen, which a clock once set
  // in the future would pin there, silencing the alert on it for good.
  if (m.end == "success") s[series("rlock_last_success_timestamp_seconds", m.key)] = m.finished_at;
}

// The largest metrics file rlock reads back: some 100,000 series, far more than a host's jobs.
constexpr size_t k_largest_metrics_file = 16 << 20;

std::string record_metrics(const std::string& path, const RunMetrics& m) {
  // The textfile directory may be shared (node_exporter's, /var/tmp): every file is opened
  // there without following a link that another user could have planted (trusted_file.h).
  TrustedDir dir = TrustedDir::open(path);
  if (!dir.problem().empty()) return dir.problem();
  std::string name = base_name(path), problem;
  // Several rlocks (cron jobs) may finish at once: the read-add-write is done under a lock on
  // a sidecar file, so no run's numbers are lost.
  Fd lock = dir.open_file(name + ".lock", O_WRONLY | O_CREAT, problem);
  if (!lock.valid()) return problem;
  if (::flock(lock.get(), LOCK_EX) != 0) return errno_message("flock " + path + ".lock");
  Fd old = dir.open_file(name, O_RDONLY, problem);
  if (!problem.empty()) return problem;
  std::optional<std::string> text = old.valid() ? read_rest(old.get(), k_largest_metrics_file) : "";
  if (!text) return errno_message("read " + path);
  MetricSeries all = parse_metrics(*text);
  add_run(all, m);
  return dir.replace(name, format_metrics(all)).value_or("");
}

}  // namespace rlock
