// The collective timeout of host communicators. A blocking MPI collective cannot be
// interrupted from inside, so a second thread watches it: the calling thread arms the
// watchdog before the call and disarms it after; if the call is still armed when the
// timeout passes (another rank died, hangs, or called a different collective), the
// watchdog prints one line saying which collective on which rank waited how long, and
// ends the process with status 1. The launcher (mpirun, srun --kill-on-bad-exit) then
// stops the other ranks; those it does not reach stop on their own watchdogs.
//
// Why not non-blocking collectives polled against a deadline: Open MPI progresses them
// only inside MPI calls, so polling with sleeps slows large transfers and polling without
// sleeps burns a core; a blocking call runs at full speed and the watchdog costs one
// mutex and one wake-up per collective.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace mptrain {

// Prints "mptrain: error: <message>" on stderr and ends the process with status 1 at
// once (no unwinding, no MPI_Finalize: a collective may still own the buffers).
[[noreturn]] void fatal_collective_failure(const std::string& message);

class CollectiveWatchdog {
 public:
  // timeout_s <= 0 disables the watchdog (no thread). who names this process in the
  // message, e.g. "rank 1 of 2".
  CollectiveWatchdog(double timeout_s, std::string who);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Keeps the watchdog armed for one collective while it lives.
  class Armed {
   public:
    ~Armed() {
      if (dog_) dog_->disarm();
    }
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;

   private:
    friend class CollectiveWatchdog;
    explicit Armed(CollectiveWatchdog* dog) : dog_(dog) {}
    CollectiveWatchdog* dog_;
  };

  // op must be a string literal (it is kept by pointer); elements is the call's size.
  [[nodiscard]] Armed arm(const char* op, size_t elements);

  double timeout_seconds() const { return timeout_s_; }

 private:
  void disarm();
  void run();

  double timeout_s_;
  std::string who_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  uint64_t armed_id_ = 0;
  const char* op_ = "";
  size_t elements_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

}  // namespace mptrain
