// The text of rlock doctor: under each server, a line per finding, then how many of each.
#include <algorithm>

#include "print/print.h"
#include "print/print_json.h"
#include "print/print_text.h"
#include "util/text.h"

namespace rlock {

const char* level_name(Finding::Level level) {
  switch (level) {
  case Finding::Level::ok: return "ok";
  case Finding::Level::note: return "note";
  case Finding::Level::problem: return "problem";
  case Finding::Level::unknown: return "unknown";
  }
  return "";
}

void print_findings(const std::string& topology, const std::vector<Finding>& findings,
                    const OutputStyle& style) {
  if (style.json) {
    write_stdout(findings_json(topology, findings));
    return;
  }
  size_t topic_width = 0;
  for (const Finding& f : findings) topic_width = std::max(topic_width, f.topic.size());
  // What servers and sentinels said (hosts, error replies) is in the text: escaped whole here.
  auto safe = [](const std::string& text) {
    return terminal_safe(text, std::string_view::npos, Backslashes::kept);
  };
  std::string out = safe(topology) + "\n";
  // The topology's own findings first, then each server's under its name, in order of appearance.
  std::vector<std::string> servers{""};
  for (const Finding& f : findings)
    if (std::find(servers.begin(), servers.end(), f.server) == servers.end())
      servers.push_back(f.server);
  int counts[4] = {};
  for (const std::string& server : servers) {
    if (!server.empty()) out += safe(server) + "\n";
    for (const Finding& f : findings) {
      if (f.server != server) continue;
      ++counts[static_cast<int>(f.level)];
      const char* colour = f.level == Finding::Level::problem ? "31"
                           : f.level == Finding::Level::ok    ? "32"
                                                              : "33";
      std::string level = level_name(f.level);
      out += "  " + paint(style, colour, level) + std::string(8 - level.size(), ' ') + f.topic +
             std::string(topic_width + 2 - f.topic.size(), ' ') + safe(f.text) + "\n";
    }
  }
  auto count = [&](Finding::Level level, const char* one, const char* many) {
    int n = counts[static_cast<int>(level)];
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  out += count(Finding::Level::problem, "problem", "problems") + ", " +
         count(Finding::Level::note, "note", "notes") + ", " +
         count(Finding::Level::unknown, "thing not checked", "things not checked") + "\n";
  write_stdout(out);
}

}  // namespace rlock
