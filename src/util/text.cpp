#include "util/text.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace rlock {

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    int hi = hex_digit_value(text[i + 1]), lo = hex_digit_value(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

namespace {

// The length of the sequence lead byte C begins (0: none), and the range its second byte must
// be in: overlong forms (E0 80 9B is ESC in three bytes, to a lenient decoder), surrogates and
// code points past U+10FFFF are no sequence.
size_t lead_length(unsigned char c, unsigned char* low, unsigned char* high) {
  *low = 0x80;
  *high = 0xbf;
  if (c < 0xc2 || c > 0xf4) return 0;
  if (c < 0xe0) return 2;
  if (c == 0xe0) *low = 0xa0;
  if (c == 0xed) *high = 0x9f;
  if (c < 0xf0) return 3;
  if (c == 0xf0) *low = 0x90;
  if (c == 0xf4) *high = 0x8f;
  return 4;
}

// Whether TEXT[K] may follow in a sequence begun at I, with the second byte in [LOW, HIGH].
bool continues(std::string_view text, size_t i, size_t k, unsigned char low, unsigned char high) {
  auto b = static_cast<unsigned char>(text[k]);
  return k == i + 1 ? b >= low && b <= high : (b & 0xc0) == 0x80;
}

// The code point of the LEN-byte sequence at TEXT[I], a valid one.
uint32_t code_point(std::string_view text, size_t i, size_t len) {
  static constexpr unsigned char k_lead_bits[] = {0x7f, 0x1f, 0x0f, 0x07};
  uint32_t cp = static_cast<unsigned char>(text[i]) & k_lead_bits[len - 1];
  for (size_t k = i + 1; k < i + len; ++k)
    cp = cp << 6 | (static_cast<unsigned char>(text[k]) & 0x3f);
  return cp;
}

// Whether CP is a C1 control (escapes to some terminals), one of Unicode's bidirectional
// marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066
// to U+2069), which reorder what is shown around them, a zero-width character (U+200B to
// U+200D, U+FEFF), which shows as nothing, or a line or paragraph separator (U+2028, U+2029),
// which breaks a line: a key or a host name could then read as another. Valid UTF-8 all the
// same, so it is told by its code point.
bool hidden_control(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) ||
         cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

// Appends each of the LEN bytes at TEXT[I] as \xNN.
void append_escaped(std::string& out, std::string_view text, size_t i, size_t len) {
  for (size_t k = i; k < i + len; ++k) {
    out += "\\x";
    append_hex(out, static_cast<unsigned char>(text[k]));
  }
}

}  // namespace

size_t utf8_sequence_length(std::string_view text, size_t i) {
  auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return 1;
  unsigned char low, high;
  size_t len = lead_length(c, &low, &high);
  if (len == 0 || i + len > text.size()) return 0;
  for (size_t k = i + 1; k < i + len; ++k)
    if (!continues(text, i, k, low, high)) return 0;
  return len;
}

namespace {

// Appends CP, below U+10000, as a JSON escape.
void append_json_escape(std::string& out, uint32_t cp) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
  out += buf;
}

}  // namespace

std::string json_string(std::string_view text) {
  std::string out = "\"";
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t len = utf8_sequence_length(text, i);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      append_json_escape(out, c);
      ++i;
    } else if (len > 0 && hidden_control(code_point(text, i, len))) {
      append_json_escape(out, code_point(text, i, len));
      i += len;
    } else if (len > 0) {
      out.append(text.substr(i, len));  // a whole UTF-8 sequence passes through
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out + "\"";
}

std::string json_escape_hidden(std::string_view json_text) {
  std::string out;
  out.reserve(json_text.size());
  size_t i = 0;
  while (i < json_text.size()) {
    size_t len = std::max<size_t>(utf8_sequence_length(json_text, i), 1);
    if (len > 1 && hidden_control(code_point(json_text, i, len)))
      append_json_escape(out, code_point(json_text, i, len));
    else
      out.append(json_text, i, len);
    i += len;
  }
  return out;
}

bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0, len; i < text.size(); i += len)
    if ((len = utf8_sequence_length(text, i)) == 0) return false;
  return true;
}

std::string base64(std::string_view bytes) {
  static constexpr char k_digits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t group = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) group |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) group |= static_cast<unsigned char>(bytes[i + 2]);
    for (size_t k = 0; k < 4; ++k)
      out += i + k <= bytes.size() ? k_digits[(group >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

bool is_assignment_word(std::string_view word) {
  size_t i = 0;
  while (i < word.size() && (std::isalnum(static_cast<unsigned char>(word[i])) || word[i] == '_'))
    ++i;
  return i > 0 && i < word.size() && word[i] == '=' &&
         !std::isdigit(static_cast<unsigned char>(word[0]));
}

namespace {

constexpr std::string_view k_word_end = " \t\n;&|<>()";

// One shell word of TEXT from I on: I moves past it. RAW is its text as written, the result
// is the word with quotes and backslashes taken away; nullopt when a quote is not closed.
std::optional<std::string> next_shell_word(std::string_view text, size_t& i,
                                           std::string_view& raw) {
  size_t start = i;
  std::string word;
  while (i < text.size() && k_word_end.find(text[i]) == std::string_view::npos) {
    char c = text[i];
    if (c == '\\') {
      if (i + 1 < text.size()) word += text[i + 1];
      i += 2;
    } else if (c == '\'') {
      size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) return std::nullopt;
      word.append(text.substr(i + 1, close - i - 1));
      i = close + 1;
    } else if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        word += text[i];
      }
      if (i >= text.size()) return std::nullopt;
      ++i;
    } else {
      word += c;
      ++i;
    }
  }
  raw = text.substr(start, std::min(i, text.size()) - start);
  i = std::min(i, text.size());
  return word;
}

bool is_shell_keyword(std::string_view word) {
  for (std::string_view k : {"if", "then", "else", "elif", "fi", "for", "while", "until", "do",
                             "done", "case", "esac", "{", "}", "!", "[[", "time", "function"})
    if (word == k) return true;
  return false;
}

}  // namespace

std::string shell_command_name(std::string_view text) {
  size_t i = 0;
  for (;;) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
    if (i >= text.size() || k_word_end.find(text[i]) != std::string_view::npos) return "sh";
    std::string_view raw;
    auto word = next_shell_word(text, i, raw);
    if (!word) return "sh";
    if (is_assignment_word(raw) || *word == "exec") continue;
    if (word->empty() || is_shell_keyword(*word) ||
        raw.find_first_of("$`") != std::string_view::npos)
      return "sh";
    return *word;
  }
}

std::string shell_command_summary(std::string_view text) {
  std::string name = shell_command_name(text);
  size_t start = text.find_first_not_of(" \t\n");
  size_t end = text.find_last_not_of(" \t\n");
  bool alone = start != std::string_view::npos && text.substr(start, end - start + 1) == name;
  return alone ? name : name + " ...";
}

std::string terminal_safe(std::string_view text, size_t max_chars, Backslashes backslashes) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  for (size_t chars = 0; i < text.size(); ++chars) {
    if (chars == max_chars) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(text[i]);
    size_t len = utf8_sequence_length(text, i);
    if (len == 0 || c < 0x20 || c == 0x7f) {
      append_escaped(out, text, i, 1);
      ++i;
    } else if (c == '\\' && backslashes == Backslashes::escaped) {
      out += "\\\\";  // so that a key spelled "a\x1b" does not read as "a" and ESC
      ++i;
    } else if (hidden_control(code_point(text, i, len))) {
      append_escaped(out, text, i, len);  // one character, however many escapes
      i += len;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

namespace {

// Whether TEXT[I..] is the start of a UTF-8 sequence that the bytes after TEXT would complete.
bool cut_sequence(std::string_view text, size_t i) {
  unsigned char low, high;
  size_t len = lead_length(static_cast<unsigned char>(text[i]), &low, &high);
  if (len == 0 || i + len <= text.size()) return false;
  for (size_t k = i + 1; k < text.size(); ++k)
    if (!continues(text, i, k, low, high)) return false;
  return true;
}

}  // namespace

std::string OutputEscaper::feed(std::string_view piece) {
  std::string text = std::exchange(held_, std::string()) + std::string(piece);
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c == '\r' && i + 1 == text.size()) break;  // the next piece says whether a \n follows
    if (c == '\r' && text[i + 1] == '\n') {
      out += "\r\n";
      i += 2;
      continue;
    }
    size_t len = utf8_sequence_length(text, i);
    if (len == 0 && cut_sequence(text, i)) break;
    if (len == 0 || len == 1) {
      append_escaped(out, text, i, 1);
      ++i;
    } else if (hidden_control(code_point(text, i, len))) {
      append_escaped(out, text, i, len);
      i += len;
    } else {
      out.append(text, i, len);
      i += len;
    }
  }
  held_ = text.substr(i);
  return out;
}

std::string OutputEscaper::finish() {
  std::string out;
  std::string held = std::exchange(held_, std::string());
  append_escaped(out, held, 0, held.size());
  return out;
}

namespace {

// The edits that make A into B: letters inserted, deleted, replaced, or two neighbours swapped
// (optimal string alignment distance).
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> closest_word(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  constexpr size_t most = 2;
  if (word.empty() || word.size() > 64) return std::nullopt;  // no typo of a name rlock knows
  std::string dashed(word);  // TOML's snake_case: kill_after for kill-after
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  for (const std::string& candidate : candidates)
    if (dashed == candidate) return candidate;
  // The nearest by edits, when one alone is nearest.
  std::optional<std::string> best;
  size_t best_distance = most + 1;
  bool tie = false;
  for (const std::string& candidate : candidates) {
    size_t distance = edit_distance(dashed, candidate);
    if (distance > most || 2 * distance >= std::max(dashed.size(), candidate.size())) continue;
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
      tie = false;
    } else if (distance == best_distance && candidate != *best) {
      tie = true;
    }
  }
  if (best) return tie ? std::nullopt : best;
  // Else the longest name it starts with, a word after it (redis-url for redis).
  std::optional<std::string> longest;
  for (const std::string& candidate : candidates)
    if (candidate.size() > 2 && dashed.starts_with(candidate + "-") &&
        (!longest || candidate.size() > longest->size()))
      longest = candidate;
  return longest;
}

}  // namespace rlock
