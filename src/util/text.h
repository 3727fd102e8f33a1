// Small text helpers that several parsers and printers share.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rlock {

inline constexpr const char* k_hex_digits = "0123456789abcdef";

// Appends BYTE as two lowercase hex digits.
inline void append_hex(std::string& out, unsigned char byte) {
  out += k_hex_digits[byte >> 4];
  out += k_hex_digits[byte & 15];
}

// 0-15 for a hex digit (either case), -1 for anything else.
inline int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The length of the valid UTF-8 sequence at TEXT[I] (1 for ASCII), or 0 when there is none.
size_t utf8_sequence_length(std::string_view text, size_t i);

// TEXT for a terminal line: control characters (newlines, escape sequences, C1) and bytes that
// are not valid UTF-8 become \xNN; valid UTF-8 stays. Keys and input echoed in messages can
// neither break a log line in two nor drive the terminal. The one escaping rule of every text
// output (stdout and stderr; JSON has json_string). Past MAX_CHARS characters (an escape is
// one), the rest becomes "...".
std::string terminal_safe(std::string_view text, size_t max_chars = std::string_view::npos);

// A command's output for the operator's terminal, piece by piece (rlock logs shows another
// host's): as terminal_safe, except that newlines and tabs stay, and a carriage return right
// before a newline. A UTF-8 sequence or a "\r\n" cut between two pieces is judged whole.
class OutputEscaper {
public:
  // PIECE made safe, but for its last bytes when they may begin what the next piece ends.
  std::string feed(std::string_view piece);
  // What feed() held back, the output having ended.
  std::string finish();

private:
  std::string held_;
};

// TEXT as a JSON string literal, quotes included; bytes that are not valid UTF-8 become U+FFFD.
std::string json_string(std::string_view text);

// Whether WORD starts with a shell assignment, NAME=value (a name of letters, digits and '_'
// that does not start with a digit, then '='): a value that may be a secret.
bool is_assignment_word(std::string_view word);

// The program a shell command line starts, to name it in the lock value and the history: its
// first word that is no NAME=value assignment (nor `exec`), unquoted, without arguments; "sh"
// when none can be told (a keyword, a subshell, an expansion, a redirection first ...). Never
// an assignment, nor any word after the program's.
std::string shell_command_name(std::string_view text);

// "%40" -> "@"; nullopt for a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view text);

}  // namespace rlock
