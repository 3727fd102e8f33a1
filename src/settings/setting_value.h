// A value given for a setting and where it came from (settings.h), with the parsers the
// settings share: what each setting's apply function (SettingInfo) reads its value with.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "settings/settings.h"
#include "util/duration.h"
#include "util/error.h"

namespace rlock {

inline constexpr const char* k_duration_help =
    "(500ms, 30s, 5m, 1h30m, 2d; a bare number is seconds)";

// A value given for a setting, and where it came from, with the parsers settings share. A bad
// value is a usage error (64) from a flag, else a configuration error (78) naming its origin.
class SettingValue {
public:
  SettingValue(std::string name, const RawValue& raw) : name_(std::move(name)), raw_(raw) {}
  const RawValue& raw() const { return raw_; }

  [[noreturn]] void bad(const std::string& why) const {
    switch (raw_.origin.kind) {
    case Origin::Kind::flag: throw usage_error("--" + name_ + ": " + why);
    case Origin::Kind::file:
      throw Error(k_exit_config, raw_.origin.where + ": " + name_ + ": " + why);
    default: throw Error(k_exit_config, raw_.origin.where + ": " + why);
    }
  }

  std::string single() const {
    if (raw_.values.size() != 1) bad("expected one value");
    return raw_.values.front();
  }

  // TEXT as a duration; else why it is none: out of range, or not written as one. OR_ELSE:
  // what else the setting takes (", or inf").
  Millis duration(const std::string& text, const std::string& or_else = "") const {
    auto d = parse_duration(text);
    if (d) return *d;
    if (duration_too_long(text))
      bad("'" + text + "' is too long: at most " + format_duration(k_max_duration) + or_else);
    bad("bad duration '" + text + "' " + k_duration_help + or_else);
  }

  Millis positive_duration() const {
    Millis d = duration(single());
    if (d.count() == 0) bad("must be more than zero");
    return d;
  }

  // A whole number of at most DIGITS digits; else "'x' is not WHAT".
  int whole_number(size_t digits, const char* what) const {
    std::string n = single();
    if (n.empty() || n.size() > digits || n.find_first_not_of("0123456789") != std::string::npos)
      bad("'" + n + "' is not " + what);
    return std::stoi(n);
  }

  bool flag() const {
    std::string text = single();
    if (text == "true") return true;
    if (text == "false") return false;
    bad("expected true or false, not '" + text + "'");
  }

  // One of CHOICES (two), as its index; else "'x' is neither A nor B".
  int choice(const char* first, const char* second) const { return one_of({first, second}); }

  // One of CHOICES, as its index; else "'x' is neither A nor B" or "'x' is not A, B or C".
  int one_of(std::initializer_list<const char*> choices) const {
    std::string text = single();
    std::vector<std::string> names(choices.begin(), choices.end());
    for (size_t i = 0; i < names.size(); ++i)
      if (text == names[i]) return static_cast<int>(i);
    if (names.size() == 2) bad("'" + text + "' is neither " + names[0] + " nor " + names[1]);
    std::string listed = names[0];
    for (size_t i = 1; i < names.size(); ++i)
      listed += (i + 1 == names.size() ? " or " : ", ") + names[i];
    bad("'" + text + "' is not " + listed);
  }

private:
  const std::string name_;
  const RawValue& raw_;
};

}  // namespace rlock
