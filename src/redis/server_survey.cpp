#include "redis/server_survey.h"

#include <algorithm>
#include <charconv>
#include <chrono>

#include "redis/redis.h"

namespace rlock {

namespace {

// INFO's text: "# Section" lines, then "field:value" lines.
Fields parse_info(const std::string& text) {
  Fields fields;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t colon = line.find(':');
    if (!line.empty() && line[0] != '#' && colon != std::string::npos)
      fields[line.substr(0, colon)] = line.substr(colon + 1);
    at = end + 1;
  }
  return fields;
}

// A reply of field, value, field, value ... (SENTINEL MASTER, each of SENTINEL REPLICAS).
Fields pairs(const Reply& reply) {
  Fields fields;
  for (size_t i = 0; i + 1 < reply.elements.size(); i += 2)
    fields[reply.elements[i].str] = reply.elements[i + 1].str;
  return fields;
}

// CLIENT INFO's "field=value field=value ..." line: the value of FIELD, or "".
std::string client_field(const std::string& line, const std::string& field) {
  std::string key = field + "=";
  for (size_t at = 0; at < line.size();) {
    size_t end = line.find(' ', at);
    if (end == std::string::npos) end = line.size();
    if (line.compare(at, key.size(), key) == 0)
      return line.substr(at + key.size(), end - at - key.size());
    at = end + 1;
  }
  return "";
}

using WallMs = std::chrono::milliseconds;

int64_t wall_ms() {
  return std::chrono::duration_cast<WallMs>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string field_of(const Fields& fields, const std::string& name) {
  auto it = fields.find(name);
  return it == fields.end() ? "" : it->second;
}

std::optional<int64_t> whole_number(const std::string& text) {
  int64_t n = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || err != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

ServerSurvey survey_server(NodeRedis& node, TimePoint deadline) {
  ServerSurvey s;
  s.name = node.name();
  std::vector<Argv> commands{{"INFO"}, {"TIME"}, {"CLIENT", "INFO"}};
  for (const char* setting : k_surveyed_settings) commands.push_back({"CONFIG", "GET", setting});
  // The connection first, so that the clock's round trip is one command's, not a handshake's.
  if (auto up = node.pipeline({{"PING"}}, deadline); !up) {
    s.unreachable = up.failure();
    return s;
  }
  int64_t sent = wall_ms();
  TimePoint started = Clock::now();
  auto replies = node.pipeline(commands, deadline);
  s.round_trip = std::chrono::duration_cast<Millis>(Clock::now() - started);
  int64_t received = wall_ms();
  if (!replies) {
    s.unreachable = replies.failure();
    return s;
  }
  const std::vector<Reply>& r = *replies;
  if (r[0].type == Reply::Type::error)
    s.info_refused = r[0].str;
  else
    s.info = parse_info(r[0].str);
  if (auto server_ms = server_time_ms(r[1]))
    s.clock_ahead = Millis(*server_ms - (sent + received) / 2);
  if (r[2].type != Reply::Type::error) s.local_address = client_field(r[2].str, "laddr");
  for (size_t i = 3; i < r.size(); ++i) {
    if (r[i].type == Reply::Type::error) {
      if (s.config_refused.empty()) s.config_refused = r[i].str;
    } else if (r[i].elements.size() >= 2) {
      s.config[r[i].elements[0].str] = r[i].elements[1].str;
    }
  }
  if (auto connection = node.connection(); connection)
    s.certificate_expires = (*connection)->certificate_expiry();
  return s;
}

SentinelView ask_sentinel(const RedisUrl& sentinel, const std::string& master_name,
                          const ConnectOptions& options, TimePoint deadline) {
  SentinelView view;
  view.sentinel = sentinel.redacted();
  const std::vector<Argv> commands{{"SENTINEL", "MASTER", master_name},
                                   {"SENTINEL", "REPLICAS", master_name}};
  RedisUrl bare = sentinel;
  bare.password.reset();
  ConnectOptions no_password = options;
  no_password.password = {};
  NodeRedis first(bare, no_password);
  auto replies = first.pipeline(commands, deadline);
  if (replies && replies->front().type == Reply::Type::error &&
      error_code(replies->front().str) == "NOAUTH") {
    NodeRedis second(sentinel, options);
    replies = second.pipeline(commands, deadline);
  }
  if (!replies) {
    view.failure = replies.failure();
    return view;
  }
  for (const Reply& reply : *replies)
    if (reply.type == Reply::Type::error) {
      view.failure = Failure{Failure::Kind::server, view.sentinel + ": " + reply.str};
      return view;
    }
  view.master = pairs((*replies)[0]);
  for (const Reply& replica : (*replies)[1].elements) view.replicas.push_back(pairs(replica));
  return view;
}

Result<std::vector<ClusterShard>> cluster_shards(NodeRedis& node, TimePoint deadline) {
  auto reply = node.call({"CLUSTER", "SLOTS"}, deadline);
  if (!reply) return reply.failure();
  if (!reply->is_array()) return unexpected_reply("CLUSTER SLOTS");
  // Each range: start, end, then the master and its replicas, each [host, port, id, ...].
  auto address = [](const Reply& node) -> std::optional<std::pair<std::string, int>> {
    if (!node.is_array() || node.elements.size() < 2 || !node.elements[1].is_integer())
      return std::nullopt;
    return std::make_pair(node.elements[0].str, static_cast<int>(node.elements[1].integer));
  };
  std::vector<ClusterShard> shards;
  for (const Reply& range : reply->elements) {
    if (!range.is_array() || range.elements.size() < 3) return unexpected_reply("CLUSTER SLOTS");
    auto master = address(range.elements[2]);
    if (!master) return unexpected_reply("CLUSTER SLOTS");
    auto known = std::find_if(shards.begin(), shards.end(), [&](const ClusterShard& s) {
      return s.host == master->first && s.port == master->second;
    });
    if (known != shards.end()) continue;  // another range of a master already listed
    ClusterShard shard{master->first, master->second, {}};
    for (size_t i = 3; i < range.elements.size(); ++i)
      if (auto replica = address(range.elements[i])) shard.replicas.push_back(*replica);
    shards.push_back(std::move(shard));
  }
  return shards;
}

RedisUrl at_address(RedisUrl url, const std::string& host, int port) {
  if (url.scheme == RedisUrl::Scheme::unix_socket) url.scheme = RedisUrl::Scheme::tcp;
  url.host = host;
  url.port = port;
  url.path.clear();
  return url;
}

}  // namespace rlock
