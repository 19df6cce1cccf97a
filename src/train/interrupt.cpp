// SIGINT/SIGTERM handling for the training loop (see interrupt.h).
#include "train/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "core/error.h"

namespace mptrain {

namespace {

static_assert(std::atomic<int>::is_always_lock_free,
              "the signal flag must be lock-free to be set in a handler");

// The received signal (0: none). Process-wide by necessity: a handler sees nothing else.
std::atomic<int> g_signal{0};
std::atomic<bool> g_guard_alive{false};
struct sigaction g_old_int, g_old_term;

void write_stderr(const char* text) {
  // write(2) is async-signal-safe; stdio is not.
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

extern "C" void on_signal(int sig) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) {
    write_stderr(sig == SIGINT ? "\nmptrain: SIGINT: stopping after this step and writing a checkpoint "
                                 "(Ctrl-C again to quit at once)\n"
                               : "\nmptrain: SIGTERM: stopping after this step and writing a checkpoint\n");
    return;
  }
  write_stderr("\nmptrain: second signal: quitting now without a checkpoint\n");
  ::_exit(128 + sig);
}

}  // namespace

InterruptGuard::InterruptGuard() {
  bool expected = false;
  MPT_CHECK(g_guard_alive.compare_exchange_strong(expected, true), "only one InterruptGuard may be active");
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes in progress continue rather than fail with EINTR
  // A signal the process was started ignoring (nohup, a background job of a shell without
  // job control) stays ignored, as for any well-behaved program.
  ::sigaction(SIGINT, nullptr, &g_old_int);
  ::sigaction(SIGTERM, nullptr, &g_old_term);
  if (g_old_int.sa_handler != SIG_IGN) ::sigaction(SIGINT, &sa, nullptr);
  if (g_old_term.sa_handler != SIG_IGN) ::sigaction(SIGTERM, &sa, nullptr);
}

InterruptGuard::~InterruptGuard() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  g_guard_alive.store(false);
}

int InterruptGuard::requested() const { return g_signal.load(); }

void InterruptGuard::request(int signal) {
  int expected = 0;
  g_signal.compare_exchange_strong(expected, signal);
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "signal";
  }
}

}  // namespace mptrain
