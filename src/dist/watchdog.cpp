// The collective watchdog thread.
#include "dist/watchdog.h"

#include <cstdio>
#include <cstdlib>

namespace mptrain {

void fatal_collective_failure(const std::string& message) {
  std::fprintf(stderr, "mptrain: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(1);
}

CollectiveWatchdog::CollectiveWatchdog(double timeout_s, std::string who) : timeout_s_(timeout_s), who_(std::move(who)) {
  if (timeout_s_ > 0.0) thread_ = std::thread([this] { run(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

CollectiveWatchdog::Armed CollectiveWatchdog::arm(const char* op, size_t elements) {
  if (!thread_.joinable()) return Armed(nullptr);
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
    ++armed_id_;
    op_ = op;
    elements_ = elements;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s_));
  }
  cv_.notify_one();
  return Armed(this);
}

void CollectiveWatchdog::disarm() {
  // No notification: the thread wakes at the old deadline at the latest, sees that the call
  // it watched has finished and goes back to waiting. That keeps a collective's cost to one
  // uncontended lock here.
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
}

void CollectiveWatchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock, [this] { return stop_ || armed_; });
      continue;
    }
    const uint64_t id = armed_id_;
    const auto deadline = deadline_;
    const bool finished = cv_.wait_until(lock, deadline, [&] { return stop_ || !armed_ || armed_id_ != id; });
    if (finished) continue;
    char what[160];
    std::snprintf(what, sizeof(what), "collective %s of %zu elements did not complete within %g s", op_, elements_,
                  timeout_s_);
    fatal_collective_failure(who_ + ": " + what +
                             " (--collective-timeout): another rank has died, hangs, or called a different "
                             "collective; stopping this rank");
  }
}

}  // namespace mptrain
