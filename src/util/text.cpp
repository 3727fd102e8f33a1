#include "util/text.h"

#include <cctype>
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

std::string json_string(std::string_view text) {
  std::string out = "\"";
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
    } else if (size_t len = utf8_sequence_length(text, i)) {
      out.append(text.substr(i, len));  // a whole UTF-8 sequence passes through
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out + "\"";
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

std::string terminal_safe(std::string_view text, size_t max_chars) {
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
    // C1 controls (U+0080..U+009F, 0xc2 0x80..0x9f in UTF-8) are escapes to some terminals.
    bool c1 = len == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0;
    if (len == 0 || c1 || c < 0x20 || c == 0x7f) {
      out += "\\x";
      append_hex(out, c);
      ++i;
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
    bool c1 = len == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0;
    if (len == 0 || len == 1 || c1) {
      out += "\\x";
      append_hex(out, c);
      ++i;
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
  for (unsigned char c : std::exchange(held_, std::string())) {
    out += "\\x";
    append_hex(out, c);
  }
  return out;
}

}  // namespace rlock
