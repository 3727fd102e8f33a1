// The newest bytes of a run's output, at most a fixed number, for OutputSender (kept_output.h)
// to send: stdout's and stderr's bytes in the order they came, in one ring of bytes allocated
// once, and where the stream changes from one to the other. Pure: no threads, no I/O.
//
// A ring, not a piece of memory per chunk read: the same SIZE bytes are written over and over,
// where a queue of pieces, each allocated by the capture's thread and freed by the keeper's,
// peaked at half to all of SIZE more (docs/PERFORMANCE.md "Kept output"). Its pages are touched
// only as output comes: a run that prints 1 kB costs a page, whatever SIZE; one that prints
// SIZE or more holds SIZE, whether Redis keeps up or not.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>

namespace rlock {

class OutputWindow {
public:
  // Keeps at most SIZE bytes (at least 1).
  explicit OutputWindow(uint64_t size);

  // BYTES of STREAM (1 or 2), next in the output; the oldest bytes past SIZE are dropped.
  void add(int stream, std::string_view bytes);
  // Drops the bytes before OFFSET (they are sent).
  void drop_to(uint64_t offset);

  // The output's offsets: the first byte kept, and the end (all the output's length so far).
  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }
  bool empty() const { return begin_ == end_; }

  // The stretch of one stream's bytes that OFFSET (kept) is in: the stream, and where the
  // stretch ends (the next byte is of the other stream, or not come yet).
  struct Stretch {
    int stream = 1;
    uint64_t end = 0;
  };
  Stretch stretch_at(uint64_t offset) const;
  // A copy of the bytes from FROM to TO, both within [begin(), end()].
  std::string bytes(uint64_t from, uint64_t to) const;

private:
  uint64_t size_;
  std::unique_ptr<char[]> ring_;  // byte OFFSET is at OFFSET % size_
  uint64_t begin_ = 0, end_ = 0;
  int first_stream_ = 1;  // the stream of the byte at begin_
  int last_stream_ = 1;   // the stream of the byte before end_
  // Where the stream changes, after begin_: each byte there is of the other stream than the
  // byte before it. Eight bytes a change: lines of 40 bytes alternating between stdout and
  // stderr cost a fifth more, where a piece each doubled what they cost.
  std::deque<uint64_t> changes_;
};

}  // namespace rlock
