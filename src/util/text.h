// Small text helpers that several parsers and printers share.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// Whether terminal_safe() writes a backslash as "\\": always for a text from outside (a key,
// a host, a value); not for a message already made of such escaped pieces, which would then
// read "\\x1b" for what one escape said.
enum class Backslashes { escaped, kept };

// TEXT for a terminal line: control characters (newlines, escape sequences, C1), Unicode's
// bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F, U+202A to
// U+202E, U+2066 to U+2069), zero-width characters (U+200B to U+200D, U+FEFF), line and
// paragraph separators (U+2028, U+2029) and bytes that are not valid UTF-8 become \xNN, a byte
// each, and a backslash "\\" (BACKSLASHES); other valid UTF-8 stays. Keys and input echoed in
// messages can neither break a log line in two, nor drive the terminal, nor reorder or hide
// what is around them, nor read as another (rlock-redis(7) "Escaped text"). The one escaping rule
// of every text output (stdout and stderr; JSON has json_string and json_escape_hidden). Past
// MAX_CHARS characters (an escape is one), the rest becomes "...".
std::string terminal_safe(std::string_view text, size_t max_chars = std::string_view::npos,
                          Backslashes backslashes = Backslashes::escaped);

// Among CANDIDATES, the one WORD most likely mistyped from, as git's "did you mean": one it
// spells with '_' for '-' or with a word after it (redis_url, redis-url for redis), else the
// nearest by edits (a letter left out, one too many, two swapped, one wrong; at most 2 such
// edits, and fewer than half its letters). nullopt when none is that close, or two are.
std::optional<std::string> closest_word(std::string_view word,
                                        const std::vector<std::string>& candidates);

// A command's output for the operator's terminal, piece by piece (rlock logs shows another
// host's): as terminal_safe (bidirectional characters too), except that newlines and tabs stay, and
// a carriage return right before a newline. A UTF-8 sequence or a "\r\n" cut between two pieces is
// judged whole.
class OutputEscaper {
public:
  // PIECE made safe, but for its last bytes when they may begin what the next piece ends.
  std::string feed(std::string_view piece);
  // What feed() held back, the output having ended.
  std::string finish();

private:
  std::string held_;
};

// TEXT as a JSON string literal, quotes included; bytes that are not valid UTF-8 become U+FFFD,
// and what terminal_safe() escapes as \uXXXX.
std::string json_string(std::string_view text);

// JSON_TEXT, a JSON document in valid UTF-8, with the C1 controls and the bidirectional
// characters that terminal_safe() escapes written as \uXXXX: the same document to a parser,
// and one that shows on a terminal as it reads.
std::string json_escape_hidden(std::string_view json_text);

// Whether TEXT is valid UTF-8 throughout (utf8_sequence_length()).
bool is_valid_utf8(std::string_view text);

// BYTES in base64 (RFC 4648, with padding): how JSON output carries a text that is not UTF-8.
std::string base64(std::string_view bytes);

// Whether WORD starts with a shell assignment, NAME=value (a name of letters, digits and '_'
// that does not start with a digit, then '='): a value that may be a secret.
bool is_assignment_word(std::string_view word);

// The program a shell command line starts, to name it in the lock value and the history: its
// first word that is no NAME=value assignment (nor `exec`), unquoted, without arguments; "sh"
// when none can be told (a keyword, a subshell, an expansion, a redirection first ...). Never
// an assignment, nor any word after the program's.
std::string shell_command_name(std::string_view text);

// A shell command line for messages and `rlock config`: shell_command_name(), then " ..." when
// the line holds more ("vault ..." for "VAULT_TOKEN=s.x vault kv get pw"), so that neither an
// assignment's value nor an argument is shown.
std::string shell_command_summary(std::string_view text);

// "%40" -> "@"; nullopt for a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view text);

}  // namespace rlock
