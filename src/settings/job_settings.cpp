#include "settings/job_settings.h"

#include <algorithm>

#include "settings/setting_value.h"

namespace rlock {

namespace {

const RawValue* lookup(const RawSettings& s, const std::string& name) {
  auto it = s.find(name);
  return it == s.end() ? nullptr : &it->second;
}

// An exit status from 1 to 255 as written in --retry-on; nullopt when TEXT is none.
std::optional<int> exit_status(const std::string& text) {
  if (text.empty() || text.size() > 3 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  int n = std::stoi(text);
  if (n < 1 || n > 255) return std::nullopt;
  return n;
}

}  // namespace

void apply_retry(const SettingValue& v, Resolved& r) {
  r.run.retry = v.whole_number(3, "a number of attempts after the first, from 0 to 999");
}

void apply_retry_delay(const SettingValue& v, Resolved& r) {
  r.run.retry_delay = v.duration(v.single());
  if (r.run.retry_delay > k_max_retry_delay) v.bad("at most " + format_duration(k_max_retry_delay));
}

// "1,2,75", "1-9,75": exit statuses from 1 to 255, one by one or as ranges.
void apply_retry_on(const SettingValue& v, Resolved& r) {
  std::string text = v.single();
  std::vector<int> codes;
  size_t from = 0;
  while (from <= text.size()) {
    size_t comma = std::min(text.find(',', from), text.size());
    std::string item = text.substr(from, comma - from);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    size_t dash = item.find('-');
    auto first = exit_status(item.substr(0, dash));
    auto last = dash == std::string::npos ? first : exit_status(item.substr(dash + 1));
    if (!first || !last || *last < *first)
      v.bad("'" + text +
            "' is not a list of exit statuses from 1 to 255 (such as 1,2,75 or "
            "1-9); 0 is success, never retried");
    for (int code = *first; code <= *last; ++code) codes.push_back(code);
    from = comma + 1;
  }
  std::sort(codes.begin(), codes.end());
  codes.erase(std::unique(codes.begin(), codes.end()), codes.end());
  r.run.retry_on = std::move(codes);
}

void apply_notify(const SettingValue& v, Resolved& r) {
  std::string command = v.single();
  if (command.find_first_not_of(" \t\n") == std::string::npos) v.bad("empty command");
  r.run.notify = command;
}

void apply_notify_on(const SettingValue& v, Resolved& r) {
  using On = RunOptions::NotifyOn;
  r.run.notify_on =
      std::array{On::failure, On::change, On::always}[v.one_of({"failure", "change", "always"})];
}

void apply_notify_after(const SettingValue& v, Resolved& r) {
  r.run.notify_after = v.whole_number(4, "a number of consecutive failures from 1 to 9999");
  if (r.run.notify_after < 1) v.bad("'0' is not a number of consecutive failures from 1 to 9999");
}

void apply_notify_timeout(const SettingValue& v, Resolved& r) {
  r.run.notify_timeout = v.positive_duration();
}

void check_job_settings(const RawSettings& s, const Resolved& r) {
  // A flag that does nothing without another is a mistake; a config file's value is a default
  // for the runs that give the other.
  auto needs = [&](const char* name, const char* other, bool present, const char* what) {
    const RawValue* v = lookup(s, name);
    if (v && v->origin.kind == Origin::Kind::flag && !present)
      SettingValue(name, *v).bad(std::string("needs --") + other + " " + what);
  };
  bool retry = r.run.retry > 0, notify = r.run.notify.has_value();
  needs("retry-delay", "retry", retry, "N: how many more attempts");
  needs("retry-on", "retry", retry, "N: how many more attempts");
  needs("notify-on", "notify", notify, "CMD: what to run");
  needs("notify-after", "notify", notify, "CMD: what to run");
  needs("notify-timeout", "notify", notify, "CMD: what to run");
  // The fleet's failures are counted in the history.
  if (!notify || r.run.history_length > 0) return;
  using On = RunOptions::NotifyOn;
  if (r.run.notify_after > 1)
    SettingValue("notify-after", *lookup(s, "notify-after"))
        .bad("counts failures in the history, and --history-length 0 keeps none");
  if (r.run.notify_on == On::change)
    SettingValue("notify-on", *lookup(s, "notify-on"))
        .bad("change compares with the last run in the history, and --history-length 0 keeps "
             "none");
}

}  // namespace rlock
