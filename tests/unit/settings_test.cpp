#include <doctest/doctest.h>
#include <map>

#include "settings/config_file.h"
#include "settings/settings.h"
#include "util/error.h"

using namespace rlock;
using namespace std::chrono_literals;

namespace {

RawSettings flags(std::initializer_list<std::pair<const char*, const char*>> items) {
  RawSettings out;
  for (auto [name, value] : items)
    out[name] = RawValue{{value}, {Origin::Kind::flag, std::string("--") + name}};
  return out;
}

// The same layering the command line does: defaults < file < environment < flags.
Resolved layered(std::string_view file, std::map<std::string, std::string> env,
                 const RawSettings& flag_layer) {
  RawSettings s = default_settings();
  overlay(s, parse_config(file, "test.toml"));
  overlay(s, environment_settings([&](const char* name) -> const char* {
            auto it = env.find(name);
            return it == env.end() ? nullptr : it->second.c_str();
          }));
  overlay(s, flag_layer);
  return resolve_settings(s);
}

int exit_status_of(std::string_view file, const RawSettings& flag_layer = {}) {
  try {
    layered(file, {}, flag_layer);
  } catch (const Error& e) {
    return e.exit_status();
  }
  return 0;
}

}  // namespace

TEST_CASE("defaults") {
  Resolved r = layered("", {}, {});
  CHECK(r.global.redis_urls == std::vector<std::string>{"redis://127.0.0.1:6379"});
  CHECK(r.run.ttl == 30s);
  CHECK(!r.run.wait);
  CHECK(r.run.conflict_exit_code == 75);
  CHECK(r.global.connect.connect_timeout == 2s);
  CHECK(r.global.connect.command_timeout == 3s);
}

TEST_CASE("the messages a wrong address or password causes name where it came from") {
  CHECK(layered("", {}, {}).global.connect.default_address == "127.0.0.1:6379");
  CHECK(layered("", {{"RLOCK_REDIS_URL", "redis://h:1"}}, {}).global.connect.default_address == "");
  CHECK(layered("", {{"REDISCLI_AUTH", "x"}}, {}).global.connect.password_origin ==
        "the environment's REDISCLI_AUTH");
  CHECK(layered("password = \"x\"\n", {}, {}).global.connect.password_origin ==
        "the config file, test.toml:1:1");
  CHECK(layered("", {}, flags({{"password-file", "/p"}})).global.connect.password_origin ==
        "the file /p (--password-file)");
  CHECK(layered("", {}, {}).global.connect.password_origin == "");
}

TEST_CASE("a flag wins over the file for quiet, verbose and shared") {
  CHECK(layered("quiet = true\n", {}, flags({{"verbose", "true"}})).global.verbosity ==
        Verbosity::verbose);
  CHECK(layered("verbose = true\n", {}, flags({{"quiet", "true"}})).global.verbosity ==
        Verbosity::quiet);
  CHECK(exit_status_of("quiet = true\nverbose = true\n") == 78);
  Resolved shared = layered("limit = 3\n", {}, flags({{"shared", "true"}}));
  CHECK((shared.run.shared && shared.run.limit == 0));
  Resolved limited = layered("shared = true\n", {}, flags({{"limit", "3"}}));
  CHECK((!limited.run.shared && limited.run.limit == 3));
  CHECK(exit_status_of("shared = true\nlimit = 3\n") == 78);
  CHECK(exit_status_of("", flags({{"quiet", "true"}, {"verbose", "true"}})) == 64);
}

TEST_CASE("flag beats environment beats file beats default") {
  std::string file = "redis = [\"redis://file:1\"]\nttl = \"7s\"\nconflict-exit-code = 3\n";
  Resolved from_file = layered(file, {}, {});
  CHECK(from_file.global.redis_urls.front() == "redis://file:1");
  CHECK(from_file.run.ttl == 7s);
  CHECK(from_file.run.conflict_exit_code == 3);

  Resolved from_env = layered(file, {{"RLOCK_REDIS_URL", "redis://env:2"}}, {});
  CHECK(from_env.global.redis_urls.front() == "redis://env:2");

  Resolved from_flag = layered(file, {{"RLOCK_REDIS_URL", "redis://env:2"}},
                               flags({{"redis", "redis://flag:3"}, {"ttl", "9s"}}));
  CHECK(from_flag.global.redis_urls.front() == "redis://flag:3");
  CHECK(from_flag.run.ttl == 9s);
  CHECK(from_flag.run.conflict_exit_code == 3);  // untouched by flags: still the file's
}

TEST_CASE("--tls makes every plain URL a TLS one, wherever the URL came from") {
  auto urls = [](std::string_view file, const RawSettings& flag_layer) {
    return layered(file, {}, flag_layer).global.redis_urls;
  };
  CHECK(urls("", flags({{"tls", "true"}})) == std::vector<std::string>{"rediss://127.0.0.1:6379"});
  CHECK(urls("redis = [\"redis://a:1\", \"rediss://b:2\", \"redis://c:3\"]\ntls = true\n", {}) ==
        std::vector<std::string>{"rediss://a:1", "rediss://b:2", "rediss://c:3"});
  CHECK(urls("", flags({{"redis", "redis-sentinel://s1:26379,s2:26379/m"}, {"tls", "true"}})) ==
        std::vector<std::string>{"rediss-sentinel://s1:26379,s2:26379/m"});
  CHECK(urls("", flags({{"redis", "redis://a:1"}})) == std::vector<std::string>{"redis://a:1"});
  // A socket has no TLS: a configuration error, from a flag too.
  CHECK(exit_status_of("redis = \"unix:///run/redis.sock\"\n", flags({{"tls", "true"}})) == 78);
}

TEST_CASE("passwords: flag file > RLOCK_PASSWORD > REDISCLI_AUTH > config file") {
  Resolved r = layered("password = \"from-file\"\n", {}, {});
  CHECK(*r.global.connect.password.password == "from-file");
  r = layered("password = \"from-file\"\n", {{"REDISCLI_AUTH", "cli"}}, {});
  CHECK(*r.global.connect.password.password == "cli");
  r = layered("", {{"REDISCLI_AUTH", "cli"}, {"RLOCK_PASSWORD", "ours"}}, {});
  CHECK(*r.global.connect.password.password == "ours");
  r = layered("", {{"RLOCK_PASSWORD", "ours"}}, flags({{"password-file", "/run/pw"}}));
  CHECK(*r.global.connect.password.file == "/run/pw");
  CHECK(!r.global.connect.password.password);
  r = layered("password-file = \"/etc/pw\"\n", {{"RLOCK_PASSWORD", "ours"}}, {});
  CHECK(*r.global.connect.password.password == "ours");
  CHECK(!r.global.connect.password.file);
  CHECK(exit_status_of("password = \"a\"\npassword-file = \"/b\"\n") == 78);
}

TEST_CASE("a password command is one more source, weighed with the others") {
  Resolved r = layered("", {{"RLOCK_PASSWORD", "ours"}}, flags({{"password-command", "vault x"}}));
  CHECK(*r.global.connect.password.command == "vault x");
  CHECK(!r.global.connect.password.password);
  r = layered("password-command = \"vault x\"\n", {{"RLOCK_PASSWORD", "ours"}}, {});
  CHECK(*r.global.connect.password.password == "ours");
  CHECK(!r.global.connect.password.command);
  CHECK(exit_status_of("password-command = \"a\"\npassword-file = \"/b\"\n") == 78);
  CHECK(exit_status_of("", flags({{"password-command", "a"}, {"password-file", "/b"}})) == 64);
}

TEST_CASE("config file errors carry file:line:column and exit 78") {
  auto message = [](std::string_view text) {
    try {
      parse_config(text, "c.toml");
    } catch (const Error& e) {
      CHECK(e.exit_status() == 78);
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  CHECK(message("ttl = \"1s\"\nbogus = 1\n").find("c.toml:2:1: unknown key 'bogus'") == 0);
  CHECK(message("ttl = \n").find("c.toml:1:") == 0);
  CHECK(message("[section]\nttl = \"1s\"\n").find("unknown key 'section'") != std::string::npos);
  CHECK(message("ttl = true\n").find("c.toml:1:7: ttl: expected a duration") == 0);
  CHECK(message("redis = [\"a\", 2]\n").find("c.toml:1:15: redis: expected") == 0);
  CHECK(message("quiet = 1\n").find("expected true or false") != std::string::npos);
  // Non-ASCII outside one-line strings and comments is refused before toml++ sees it (README).
  CHECK(message("ttl = \"1s\"\nkill\xca\x8csignal = 1\n") ==
        "c.toml:2:5: a character other than ASCII outside a one-line string or a comment");
  CHECK(message("ttl = \"1s\" \xc2\xa0\n").find("c.toml:1:12: a character other") == 0);
  CHECK(message("sni = '''a\n\xc3\xbc'''\n").find("c.toml:2:1: a character other") == 0);
  CHECK(message("prefix = \"\\\xc3\xbc\"\n").find("c.toml:1:12: a character other") == 0);
  // ... and allowed inside them, quotes and escapes included.
  CHECK(message("prefix = \"J\xc3\xb6rg \\\" \xc3\xa4\" # \xc3\xbc\n") == "parsed");
  CHECK(message("# \xc3\xbc\nprefix = '\xc3\xbc'\nredis = [\"redis://h/\xc3\xbc\", 'b',]\n") ==
        "parsed");
}

TEST_CASE("bad values: 64 from a flag, 78 from the file") {
  CHECK(exit_status_of("ttl = \"abc\"\n") == 78);
  CHECK(exit_status_of("", flags({{"ttl", "abc"}})) == 64);
  CHECK(exit_status_of("conflict-exit-code = 256\n") == 78);
  CHECK(exit_status_of("on-lost = \"maybe\"\n") == 78);
  CHECK(exit_status_of("kill-signal = \"NOPE\"\n") == 78);
  CHECK(exit_status_of("redis = \"http://x\"\n") == 78);
  CHECK(exit_status_of("", flags({{"redis", "http://x"}})) == 78);  // a bad URL is always 78
  CHECK(exit_status_of("ttl = \"4s\"\nkill-after = \"2s\"\n") == 78);
  CHECK(exit_status_of("ttl = 45\nwait = 1.5\nconflict-exit-code = 0\n") == 0);
}

TEST_CASE("rlock config never shows a secret") {
  RawValue pw{{"hunter2"}, {Origin::Kind::environment, "RLOCK_PASSWORD"}};
  CHECK(display_value("password", pw) == "***");
  RawValue url{{"redis://u:hunter2@h:1", "redis://h2"}, {Origin::Kind::flag, "--redis"}};
  CHECK(display_value("redis", url) == "redis://u:***@h:1, redis://h2");
}

TEST_CASE("each setting is described once and consistently") {
  for (const SettingInfo& s : all_settings()) {
    CAPTURE(s.name);
    CHECK(find_setting(s.name) == &s);
    if (s.flags) {
      // The flag is the setting's name: the config file's key and --NAME are the same word
      // (flock's spellings may follow it: -w,--wait,--timeout).
      std::string names = std::string(s.flags) + ",";
      CHECK(names.find(std::string("--") + s.name + ",") != std::string::npos);
      CHECK((s.kind == SettingKind::flag) == (s.type_name == nullptr));
    }
    // A default the help names is the default rlock uses.
    std::string help = s.help;
    size_t at = help.find("(default ");
    if (s.default_text && *s.default_text && at != std::string::npos && help[at + 9] != '$')
      CHECK(help.substr(at + 9, std::string(s.default_text).size()) == s.default_text);
  }
}
