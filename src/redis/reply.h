// A Redis reply as a plain value, copied out of hiredis so nothing else handles its C objects.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlock {

struct Reply {
  enum class Type { nil, integer, string, status, error, array };
  Type type = Type::nil;
  int64_t integer = 0;
  std::string str;  // string, status and error replies
  std::vector<Reply> elements;

  bool is_nil() const { return type == Type::nil; }
  bool is_integer() const { return type == Type::integer; }
  bool is_string() const { return type == Type::string; }
  bool is_array() const { return type == Type::array; }
};

using Argv = std::vector<std::string>;

}  // namespace rlock
