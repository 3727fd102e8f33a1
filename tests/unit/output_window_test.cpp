#include <doctest/doctest.h>
#include <string>

#include "lock/output_window.h"

using namespace rlock;

namespace {

// The window's bytes as "stream:bytes|stream:bytes", run by run.
std::string runs(const OutputWindow& w) {
  std::string out;
  for (uint64_t at = w.begin(); at < w.end();) {
    OutputWindow::Stretch run = w.stretch_at(at);
    out += (out.empty() ? "" : "|") + std::to_string(run.stream) + ":" + w.bytes(at, run.end);
    at = run.end;
  }
  return out;
}

}  // namespace

TEST_CASE("OutputWindow: keeps the newest SIZE bytes, in order, through the ring's wrap") {
  OutputWindow w(8);
  CHECK(w.empty());
  w.add(1, "abcde");
  CHECK(runs(w) == "1:abcde");
  w.add(1, "fghij");
  CHECK((w.begin() == 2 && w.end() == 10));
  CHECK(runs(w) == "1:cdefghij");
  CHECK(w.bytes(5, 9) == "fghi");
  w.add(1, "0123456789abc");  // more than SIZE at once: only its last 8 bytes stay
  CHECK((w.begin() == 15 && w.end() == 23));
  CHECK(runs(w) == "1:56789abc");
  w.drop_to(20);
  CHECK(runs(w) == "1:abc");
  w.drop_to(23);
  CHECK(w.empty());
  w.add(2, "x");
  CHECK(runs(w) == "2:x");
}

TEST_CASE("OutputWindow: where stdout and stderr alternate, each byte keeps its stream") {
  OutputWindow w(10);
  w.add(1, "aa");
  w.add(2, "bbb");
  w.add(2, "b");
  w.add(1, "c");
  CHECK(runs(w) == "1:aa|2:bbbb|1:c");
  CHECK(w.stretch_at(3).stream == 2);
  CHECK(w.stretch_at(3).end == 6);
  w.drop_to(1);
  CHECK(runs(w) == "1:a|2:bbbb|1:c");
  w.drop_to(2);  // exactly where stderr begins
  CHECK(runs(w) == "2:bbbb|1:c");
  w.add(2, "dddddddd");  // pushes out all of stderr's first bytes but one
  CHECK(runs(w) == "2:b|1:c|2:dddddddd");
  w.add(1, "eeeeeeeeeeee");  // one stream's 12 bytes, past SIZE
  CHECK(runs(w) == "1:eeeeeeeeee");
  w.add(2, "f");
  CHECK(runs(w) == "1:eeeeeeeee|2:f");
}
