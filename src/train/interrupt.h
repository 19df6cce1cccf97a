// Clean stops on SIGINT (Ctrl-C) and SIGTERM.
//
// While an InterruptGuard lives, the first SIGINT or SIGTERM only records the signal
// (and says so on stderr); the training loop polls requested() after each step, finishes
// that step, writes a checkpoint, prints how to resume and exits with 128 + the signal
// number: 130 for SIGINT, 143 for SIGTERM (the shell's convention for "ended by signal
// N", so scripts see an interrupted run as a failure). A second signal while the first
// is being handled ends the process at once with the same status and no checkpoint
// (the previous checkpoint stays intact: checkpoint writes are atomic).
//
// A signal handler can only reach process-wide state, so the flag is the one global this
// needs (a lock-free std::atomic<int>, safe in a handler); only one guard may live at a time.
//
// The handler never runs on the threads that compute: the guard blocks both signals in the
// thread that creates it and in OpenMP's workers, and a thread of its own takes them with
// sigwait (interrupting a step under Open MPI corrupted the heap; interrupt.cpp says how).
#pragma once
#include <thread>

namespace mptrain {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers; throws Error if another guard is alive
  ~InterruptGuard();  // restores the previous handlers
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // The signal received (SIGINT or SIGTERM), 0 when none.
  int requested() const;

  // Records `signal` as if it had been delivered (tests, and callers that stop for
  // their own reasons through the same path).
  void request(int signal);

 private:
  std::thread waiter_;  // takes SIGINT/SIGTERM with sigwait while the guard lives
};

// "SIGINT", "SIGTERM", else "signal".
const char* signal_name(int signal);

// The exit status of a run stopped by `signal`: 128 + signal.
inline int exit_status_for_signal(int signal) { return 128 + signal; }

}  // namespace mptrain
