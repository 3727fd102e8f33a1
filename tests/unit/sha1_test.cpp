#include <doctest/doctest.h>
#include <string>

#include "lock/scripts.h"
#include "util/sha1.h"

using namespace rlock;

namespace {
std::string hex(std::string_view data) {
  Sha1Hex h = sha1_hex(data);
  return std::string(h.begin(), h.end());
}
}  // namespace

TEST_CASE("SHA-1 test vectors (FIPS 180-4 examples and boundaries)") {
  CHECK(hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  CHECK(hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  CHECK(hex(std::string(1000000, 'a')) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  // Lengths around the padding boundary (55, 56, 63, 64, 119 bytes), checked against sha1sum.
  CHECK(hex(std::string(55, 'x')) == "cef734ba81a024479e09eb5a75b6ddae62e6abf1");
  CHECK(hex(std::string(56, 'x')) == "901305367c259952f4e7af8323f480d59f81335b");
  CHECK(hex(std::string(63, 'x')) == "0ddc4e0cccd9a12850deb5abb0853a4425559fec");
  CHECK(hex(std::string(119, 'x')) == "4300320394f7ee239bcdce7d3b8bcee173a0cd5c");
  CHECK(hex(std::string(64, 'x')) == "bb2fa3ee7afb9f54c6dfb5d021f14b1ffe40c163");
}

TEST_CASE("the build names each Lua script by the SHA-1 of its text, as Redis does") {
  // CMake hashes them (cmake/embed_lua.cmake); a wrong name would cost every call a NOSCRIPT.
  for (const Script* script : {&scripts::acquire, &scripts::renew, &scripts::release,
                               &scripts::period_finish, &scripts::history_add}) {
    CHECK(script->source().size() > 100);
    CHECK(std::string(script->sha1()) == hex(script->source()));
  }
}
