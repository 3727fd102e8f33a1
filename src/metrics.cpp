#include "metrics.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "error.h"
#include "fd.h"

namespace rlock {

namespace {

struct Family {
  const char* name;
  const char* help;
};

// Every family, in the order the file lists them.
constexpr Family k_families[] = {
    {"rlock_acquisitions_total", "Lock acquisitions by result (acquired, busy, done: --once-per "
                                 "found this period done, error)."},
    {"rlock_wait_seconds_total", "Seconds spent waiting for the lock."},
    {"rlock_hold_seconds_total", "Seconds the lock was held."},
    {"rlock_renewals_total", "Successful lease renewals."},
    {"rlock_renewal_failures_total", "Failed lease renewal attempts."},
    {"rlock_losses_total", "Locks lost while the command ran."},
};

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

std::string series(const char* family, const std::string& key, const char* result = nullptr) {
  std::string s = std::string(family) + "{key=\"" + label(key) + "\"";
  if (result) s += std::string(",result=\"") + result + "\"";
  return s + "}";
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
    out += std::string("# TYPE ") + f.name + " counter\n";
    std::string prefix = std::string(f.name) + "{";
    for (const auto& [name, value] : all) {
      if (name.rfind(prefix, 0) != 0) continue;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.10g", value);
      out += name + " " + buf + "\n";
    }
  }
  return out;
}

void add_run(MetricSeries& s, const RunMetrics& m) {
  s[series("rlock_acquisitions_total", m.key, m.result.c_str())] += 1;
  s[series("rlock_wait_seconds_total", m.key)] += m.wait_seconds;
  s[series("rlock_hold_seconds_total", m.key)] += m.hold_seconds;
  s[series("rlock_renewals_total", m.key)] += static_cast<double>(m.renewals);
  s[series("rlock_renewal_failures_total", m.key)] += static_cast<double>(m.renewal_failures);
  s[series("rlock_losses_total", m.key)] += static_cast<double>(m.losses);
}

std::string record_metrics(const std::string& path, const RunMetrics& m) {
  // Several rlocks (cron jobs) may finish at once: the read-add-write is done under a lock on
  // a sidecar file, so no run's numbers are lost.
  Fd lock(::open((path + ".lock").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!lock.valid()) return errno_message("open " + path + ".lock");
  if (::flock(lock.get(), LOCK_EX) != 0) return errno_message("flock " + path + ".lock");
  std::ifstream in(path);
  std::ostringstream old;
  if (in) old << in.rdbuf();
  MetricSeries all = parse_metrics(old.str());
  add_run(all, m);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return errno_message("open " + tmp);
    out << format_metrics(all);
    out.flush();
    if (!out) return errno_message("write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return errno_message("rename to " + path);
  return {};
}

}  // namespace rlock
