#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <doctest/doctest.h>
#include <set>

#include "lock/lock.h"
#include "lock/lock_value.h"
#include "print/print.h"
#include "util/proc_stat.h"
#include "util/user_name.h"

using namespace rlock;
using namespace std::chrono_literals;

TEST_CASE("tokens are 128 random bits in hex, never repeated") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string t = make_token();
    CHECK(t.size() == 32);
    CHECK(t.find_first_not_of("0123456789abcdef") == std::string::npos);
    seen.insert(t);
  }
  CHECK(seen.size() == 1000);
}

TEST_CASE("a lock value round-trips and starts with the owner prefix") {
  LockValue v;
  v.token = make_token();
  v.holder.host = "web-2";
  v.holder.pid = 4121;
  v.holder.user = "deploy";
  v.holder.since = WallTime(1764472320123ms);
  v.holder.cmd = "report.sh";
  std::string text = encode_lock_value(v);
  CHECK(text ==
        "rlock/1 " + v.token +
            " host=web-2 pid=4121 user=deploy since=2025-11-30T03:12:00.123Z cmd=report.sh");
  CHECK(text.rfind(owner_prefix(v.token), 0) == 0);
  // The acquire script appends the fence.
  auto back = decode_lock_value(text + " fence=17");
  REQUIRE(back);
  CHECK(back->token == v.token);
  CHECK(back->holder.host == "web-2");
  CHECK(back->holder.pid == 4121);
  CHECK(back->holder.user == "deploy");
  CHECK(back->holder.since == v.holder.since);
  CHECK(back->holder.cmd == "report.sh");
  CHECK(back->fence == 17);
}

TEST_CASE("the holder's PID namespace is in the value, and liveness is judged only from it") {
  Holder me = current_holder("job");
  REQUIRE(!me.pidns.empty());  // /proc/self/ns/pid, on every Linux rlock runs on
  LockValue v;
  v.token = make_token();
  v.holder = me;
  std::string text = encode_lock_value(v);
  CHECK(text.find(" pidns=" + me.pidns) != std::string::npos);
  auto back = decode_lock_value(text);
  REQUIRE(back);
  CHECK(back->holder.pidns == me.pidns);
  CHECK(holder_liveness(back->holder) == Liveness::running);
  // The same pid and start time in another namespace is another process: not to be judged.
  back->holder.pidns = "1";
  CHECK(holder_liveness(back->holder) == Liveness::other_pid_namespace);
  // Older rlocks wrote no pidns: judged as before.
  back->holder.pidns.clear();
  CHECK(holder_liveness(back->holder) == Liveness::running);
}

TEST_CASE("a lock held for a process group says so with group=1, and only then") {
  LockValue v;
  v.token = make_token();
  v.holder.host = "web-2";
  v.holder.pid = 4121;
  v.holder.since = WallTime(1764472320123ms);
  v.holder.boot = "3f2a9c41d07e";
  v.holder.start_ticks = 48213377;
  CHECK(encode_lock_value(v).find("group") == std::string::npos);
  auto alone = decode_lock_value(encode_lock_value(v));
  REQUIRE(alone);
  CHECK(!alone->holder.group);
  v.holder.group = true;
  std::string text = encode_lock_value(v);
  CHECK(text.ends_with(" boot=3f2a9c41d07e pstart=48213377 group=1"));
  auto back = decode_lock_value(text + " fence=17");
  REQUIRE(back);
  CHECK(back->holder.group);
  CHECK(back->holder.pid == 4121);
  CHECK(back->holder.start_ticks == 48213377);
  CHECK(back->fence == 17);
  CHECK(encode_lock_value(*back) == text + " fence=17");
  auto zero = decode_lock_value("rlock/1 0123456789abcdef0123456789abcdef pid=1 group=0");
  REQUIRE(zero);
  CHECK(!zero->holder.group);
  CHECK(!decode_lock_value("rlock/1 0123456789abcdef0123456789abcdef pid=1 group=yes"));
}

namespace {

// Until CONDITION holds, for 10 s at most.
template <class Condition> bool eventually(Condition condition) {
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    ::usleep(5000);
  }
  return true;
}

}  // namespace

TEST_CASE("a group's holder is alive while a process of its group runs, after its pid") {
  // A group leader that leaves a member behind, as `setsid ./deploy.sh` killed during its
  // `sleep`: the lock is held for the group, whose id no other group can take meanwhile.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t leader = ::fork();
  REQUIRE(leader >= 0);
  if (leader == 0) {
    ::setpgid(0, 0);
    if (::fork() == 0)
      for (;;) ::pause();
    (void)!::write(ready[1], "x", 1);
    ::_exit(0);
  }
  // The member left behind is killed with its group, even when a REQUIRE below fails.
  struct GroupKiller {
    pid_t group;
    ~GroupKiller() {
      if (group > 0) ::kill(-group, SIGKILL);
    }
  } killer{leader};
  ::close(ready[1]);
  char byte = 0;
  CHECK(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  Holder h = current_holder("deploy.sh");
  h.pid = leader;
  auto st = read_proc_stat(leader);  // a zombie's, until it is reaped below: the same start
  REQUIRE(st);
  h.start_ticks = st->start_ticks;
  int status = 0;
  REQUIRE(::waitpid(leader, &status, 0) == leader);
  CHECK(holder_liveness(h) == Liveness::gone);  // a value without group=1: the pid alone
  h.group = true;
  CHECK(holder_liveness(h) == Liveness::group_running);
  ::kill(-leader, SIGKILL);
  killer.group = 0;
  CHECK(eventually([&] { return holder_liveness(h) == Liveness::gone; }));
  h.pid = ::getpid();  // this process, group or not, runs
  h.start_ticks = read_proc_stat(h.pid)->start_ticks;
  CHECK(holder_liveness(h) == Liveness::running);
  h.start_ticks += 1;  // its pid, reused: the group the holder led is gone, whatever has its id
  CHECK(holder_liveness(h) == Liveness::gone);
}

TEST_CASE("fields with spaces, '=', '%' and control bytes survive") {
  LockValue v;
  v.token = make_token();
  v.holder.host = "h";
  v.holder.cmd = "my job=1 50%\n\x01";
  v.holder.user = "Jörg";
  std::string text = encode_lock_value(v);
  CHECK(text.find('\n') == std::string::npos);
  auto back = decode_lock_value(text);
  REQUIRE(back);
  CHECK(back->holder.cmd == v.holder.cmd);
  CHECK(back->holder.user == "Jörg");
}

TEST_CASE("values rlock did not write are not decoded") {
  for (const char* foreign : {"", "1", "some-uuid-from-java", "rlock/1 ", "rlock/1 xyz host=a",
                              "rlock/1 0123456789abcdef0123456789abcdeg host=a",
                              "rlock/1 0123456789abcdef0123456789abcdef host=%zz",
                              "rlock/1 0123456789abcdef0123456789abcdef pid=abc",
                              "rlock/1 0123456789abcdef0123456789abcdef novalue"})
    CHECK_MESSAGE(!decode_lock_value(foreign), foreign);
  CHECK(decode_lock_value("rlock/1 0123456789abcdef0123456789abcdef"));
  CHECK(decode_lock_value("rlock/1 0123456789abcdef0123456789abcdef future=field"));
}

TEST_CASE("a value carries the ttl its holder renews with") {
  LockValue v;
  v.token = make_token();
  v.holder.host = "web-2";
  v.ttl_ms = 30000;
  std::string text = encode_lock_value(v);
  CHECK(text.find(" ttl=30000") != std::string::npos);
  auto back = decode_lock_value(text + " fence=17");
  REQUIRE(back);
  CHECK(back->ttl_ms == 30000);
  CHECK(back->fence == 17);
  // Older values have none.
  CHECK(!decode_lock_value("rlock/1 0123456789abcdef0123456789abcdef host=a")->ttl_ms);
  CHECK(!decode_lock_value("rlock/1 0123456789abcdef0123456789abcdef ttl=x"));
}

TEST_CASE("a tombstone names the broken holder, or '-' for another program's lock") {
  auto ours = decode_lock_value(
      "rlock/1 broken 0123456789abcdef0123456789abcdef host=web-2 pid=4121 fence=17 "
      "broken_by=alice@ops-1 broken_at=2026-11-30T03:40:00.000Z");
  REQUIRE(ours);
  REQUIRE(ours->broken);
  CHECK(ours->token == "0123456789abcdef0123456789abcdef");
  CHECK(ours->holder.host == "web-2");
  CHECK(ours->fence == 17);
  CHECK(ours->broken->by == "alice@ops-1");
  CHECK(format_rfc3339(ours->broken->at) == "2026-11-30T03:40:00.000Z");

  auto foreign = decode_lock_value("rlock/1 broken - broken_by=alice@ops-1");
  REQUIRE(foreign);
  REQUIRE(foreign->broken);
  CHECK(foreign->token.empty());

  // Only a tombstone may name no token, and its token is otherwise a real one.
  CHECK(!decode_lock_value("rlock/1 - host=a"));
  CHECK(!decode_lock_value("rlock/1 broken xyz host=a"));
  CHECK(!decode_lock_value("rlock/1 broken - 30T0%"));
}

TEST_CASE("helper keys share the lock key's hash slot") {
  CHECK(helper_key("lock:daily", "fence") == "{lock:daily}:rlock:fence");
  CHECK(helper_key("job:{42}", "fence") == "job:{42}:rlock{}:fence");
  CHECK(helper_key("{a}b{c}", "fence") == "{a}b{c}:rlock{}:fence");
  CHECK(helper_key("x{}y", "fence") == "x{}y:rlock{}:fence");  // cannot be tagged
  CHECK(helper_key("a{b", "fence") == "{a{b}:rlock:fence");
  // A key and the key that is its own hash tag are two locks, with helpers of their own.
  CHECK(helper_key("{col:a}", "pause") == "{col:a}:rlock{}:pause");
  CHECK(helper_key("col:a", "pause") == "{col:a}:rlock:pause");
  CHECK(kept_output_key("col:a", "outputs") == "rlock-output:{col:a}:rlock:outputs");
}

TEST_CASE("holders read well to a person") {
  CHECK(describe_holder("java-uuid-1", 1500ms) ==
        "another client (value \"java-uuid-1\"), ttl 1.5s");
  CHECK(describe_holder("x\ny", -1ms) == "another client (value \"x\\x0ay\"), no ttl");
  LockValue v;
  v.token = make_token();
  v.holder = current_holder("/usr/local/bin/report.sh");
  CHECK(v.holder.cmd == "report.sh");
  std::string text = describe_holder(encode_lock_value(v) + " fence=3", 28400ms);
  CHECK(text.find(" pid " + std::to_string(v.holder.pid) + " (report.sh) for ") !=
        std::string::npos);
  CHECK(text.find("ttl 28.4s") != std::string::npos);
}

TEST_CASE("times are written in RFC 3339, UTC, to the millisecond, as gmtime would") {
  CHECK(format_rfc3339(WallTime(0ms)) == "1970-01-01T00:00:00.000Z");
  CHECK(format_rfc3339(WallTime(1764472320123ms)) == "2025-11-30T03:12:00.123Z");
  CHECK(format_rfc3339(WallTime(951782400999ms)) == "2000-02-29T00:00:00.999Z");  // leap day
  CHECK(format_rfc3339(WallTime(-1ms)) == "1969-12-31T23:59:59.999Z");
  // Against the C library's own calendar, over a spread of instants, and back again.
  for (int64_t ms = -2208988800000; ms < 4102444800000; ms += 7777777777 + ms % 1000) {
    time_t secs = static_cast<time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    tm utc{};
    gmtime_r(&secs, &utc);
    char want[64];
    std::snprintf(want, sizeof want, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                  utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                  static_cast<int>(ms - static_cast<int64_t>(secs) * 1000));
    std::string text = format_rfc3339(WallTime(std::chrono::milliseconds(ms)));
    CHECK(text == want);
    CHECK(parse_rfc3339(text) == WallTime(std::chrono::milliseconds(ms)));
  }
}

TEST_CASE("the user's name comes from /etc/passwd only when nsswitch.conf asks it first") {
  CHECK(passwd_files_first("passwd:         files systemd\ngroup: files\n") == true);
  CHECK(passwd_files_first("# passwd: sss\n  passwd:files\n") == true);
  CHECK(passwd_files_first("passwd: files [SUCCESS=return] ldap") == true);
  CHECK(passwd_files_first("passwd: sss files\n") == false);
  CHECK(passwd_files_first("passwd: compat\n") == false);
  CHECK(passwd_files_first("passwd: filesystem\n") == false);
  CHECK(passwd_files_first("group: files\n") == std::nullopt);
  CHECK(passwd_files_first("passwd:\n") == std::nullopt);
  CHECK(passwd_files_first("") == std::nullopt);

  std::string passwd = "root:x:0:0:root:/root:/bin/bash\n"
                       "+nis:::::\n"
                       "broken line\n"
                       ":x:7:7::/:/bin/sh\n"
                       "deploy:x:1000:1000:Deploy,,,:/home/deploy:/bin/bash\n"
                       "alias:x:1000:1000::/home/alias:/bin/sh\n"
                       "web:x:10000:10000::/srv:/usr/sbin/nologin";  // no final newline
  CHECK(name_in_passwd(passwd, 0) == "root");
  CHECK(name_in_passwd(passwd, 1000) == "deploy");  // the first entry with the uid, as glibc
  CHECK(name_in_passwd(passwd, 10000) == "web");
  CHECK(name_in_passwd(passwd, 100) == std::nullopt);  // not a prefix of 1000 or 10000
  CHECK(name_in_passwd(passwd, 7) == std::nullopt);
  CHECK(name_in_passwd("", 0) == std::nullopt);
}

TEST_CASE("this process's holder names the user getpwuid names") {
  passwd* pw = getpwuid(geteuid());
  REQUIRE(pw != nullptr);
  CHECK(current_holder("x").user == pw->pw_name);
}
