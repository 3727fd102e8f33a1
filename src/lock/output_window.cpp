#include "lock/output_window.h"

#include <algorithm>
#include <cstring>

namespace rlock {

OutputWindow::OutputWindow(uint64_t size)
    : size_(std::max<uint64_t>(size, 1)),
      // Not zeroed: a page of the ring is touched only once output is written there.
      ring_(std::make_unique_for_overwrite<char[]>(size_)) {}

void OutputWindow::add(int stream, std::string_view bytes) {
  if (bytes.empty()) return;
  if (empty())
    first_stream_ = stream;
  else if (stream != last_stream_)
    changes_.push_back(end_);
  last_stream_ = stream;
  // Only the last SIZE bytes can stay: the ones before pass without being written.
  if (bytes.size() > size_) {
    end_ += bytes.size() - size_;
    bytes.remove_prefix(bytes.size() - size_);
  }
  while (!bytes.empty()) {
    size_t at = end_ % size_;
    size_t n = std::min<size_t>(bytes.size(), size_ - at);
    std::memcpy(ring_.get() + at, bytes.data(), n);
    bytes.remove_prefix(n);
    end_ += n;
  }
  if (end_ - begin_ > size_) drop_to(end_ - size_);
}

void OutputWindow::drop_to(uint64_t offset) {
  if (offset <= begin_) return;
  begin_ = std::min(offset, end_);
  while (!changes_.empty() && changes_.front() <= begin_) {
    first_stream_ = 3 - first_stream_;
    changes_.pop_front();
  }
}

OutputWindow::Stretch OutputWindow::stretch_at(uint64_t offset) const {
  // The changes at or before OFFSET flip the stream of begin_ each.
  auto next = std::upper_bound(changes_.begin(), changes_.end(), offset);
  auto flips = next - changes_.begin();
  return {flips % 2 == 0 ? first_stream_ : 3 - first_stream_,
          next == changes_.end() ? end_ : *next};
}

std::string OutputWindow::bytes(uint64_t from, uint64_t to) const {
  std::string out;
  out.reserve(to - from);
  while (from < to) {
    size_t at = from % size_;
    size_t n = std::min<uint64_t>(to - from, size_ - at);
    out.append(ring_.get() + at, n);
    from += n;
  }
  return out;
}

}  // namespace rlock
