#include "crest/core/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "crest/core/units.hpp"

namespace crest {

namespace {
double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}
}  // namespace

Progress::Progress(std::string label, int64_t total_items, double interval_s, bool visible)
    : label_(std::move(label)),
      total_(total_items),
      interval_s_(interval_s),
      tty_(isatty(fileno(stderr)) == 1),
      visible_(visible),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

double Progress::elapsed_s() const { return seconds(std::chrono::steady_clock::now() - start_); }

int64_t Progress::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

std::string Progress::line_locked() const {
  const double t = std::max(1e-9, seconds(std::chrono::steady_clock::now() - start_));
  char buf[256];
  std::snprintf(
      buf, sizeof buf, "%s: %lld/%lld (%.0f%%), %.1f/s", label_.c_str(),
      static_cast<long long>(done_), static_cast<long long>(total_),
      total_ > 0 ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100.0,
      static_cast<double>(done_) / t);
  std::string s = buf;
  if (bytes_ > 0)
    s += ", " + human_bytes(static_cast<double>(bytes_)) + " at " +
         human_bytes(static_cast<double>(bytes_) / t) + "/s";
  if (done_ > 0 && done_ < total_) {
    std::snprintf(buf, sizeof buf, ", ETA %.0f s",
                  t / static_cast<double>(done_) * static_cast<double>(total_ - done_));
    s += buf;
  }
  std::snprintf(buf, sizeof buf, ", %.1f s", t);
  return s + buf;
}

void Progress::advance(int64_t items, int64_t bytes) {
  std::lock_guard lock(mu_);
  done_ += items;
  bytes_ += bytes;
  const auto now = std::chrono::steady_clock::now();
  const double due = tty_ ? 0.2 : interval_s_;
  if (!visible_ || seconds(now - last_print_) < due) return;
  last_print_ = now;
  const std::string s = line_locked();
  if (tty_)
    std::fprintf(stderr, "\r%s\033[K", s.c_str());
  else
    std::fprintf(stderr, "%s\n", s.c_str());
  std::fflush(stderr);
}

std::string Progress::finish() {
  std::lock_guard lock(mu_);
  const std::string s = line_locked();
  if (!visible_) return s;
  std::fprintf(stderr, tty_ ? "\r%s\033[K\n" : "%s\n", s.c_str());
  std::fflush(stderr);
  return s;
}

}  // namespace crest
