#include <csignal>
#include <doctest/doctest.h>

#include "process/signals.h"

using namespace rlock;

TEST_CASE("signal names") {
  CHECK(parse_signal("TERM") == SIGTERM);
  CHECK(parse_signal("SIGTERM") == SIGTERM);
  CHECK(parse_signal("int") == SIGINT);
  CHECK(parse_signal("9") == SIGKILL);
  CHECK(parse_signal("USR1") == SIGUSR1);
  CHECK(!parse_signal(""));
  CHECK(!parse_signal("NOPE"));
  CHECK(!parse_signal("0"));
  CHECK(!parse_signal("999"));
  CHECK(!parse_signal("-9"));
  CHECK(signal_name(SIGTERM) == "TERM");
  CHECK(signal_name(SIGUSR2) == "USR2");
}
