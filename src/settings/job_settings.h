// The settings of what rlock run does around the command (--retry, --notify): how each reads
// its value into RunOptions (SettingInfo::apply), and how they fit together.
#pragma once

#include "settings/settings.h"

namespace rlock {

class SettingValue;

void apply_retry(const SettingValue& v, Resolved& r);
void apply_retry_delay(const SettingValue& v, Resolved& r);
void apply_retry_on(const SettingValue& v, Resolved& r);
void apply_notify(const SettingValue& v, Resolved& r);
void apply_notify_on(const SettingValue& v, Resolved& r);
void apply_notify_after(const SettingValue& v, Resolved& r);
void apply_notify_timeout(const SettingValue& v, Resolved& r);

// What only the settings together can get wrong: --retry-delay without --retry, --notify-after
// without --notify, a --notify that needs the history it was told not to keep ... (a flag's
// mistake; a config file's values are defaults for the runs that use them).
void check_job_settings(const RawSettings& s, const Resolved& r);

}  // namespace rlock
