// Jobs on worker threads, the calling thread free (core/parallel_jobs.h).
#include "core/parallel_jobs.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace mptrain {

int worker_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

void run_jobs(size_t jobs, int threads, const std::function<void(size_t, size_t)>& work,
              const std::function<void()>& meanwhile, const std::function<void()>& poll) {
  const size_t n = std::min(static_cast<size_t>(worker_threads(threads)), std::max<size_t>(jobs, 1));
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  size_t running = n;
  std::exception_ptr error;
  auto stop = [&](std::exception_ptr e) {  // the first error stops the jobs not yet started
    std::lock_guard<std::mutex> lock(mu);
    if (!error) error = e;
    next.store(jobs);
  };
  std::vector<std::thread> pool;
  for (size_t w = 0; w < n; ++w)
    pool.emplace_back([&, w] {
      try {
        for (size_t j; (j = next.fetch_add(1)) < jobs;) work(j, w);
      } catch (...) {
        stop(std::current_exception());
      }
      std::lock_guard<std::mutex> lock(mu);
      --running;
      cv.notify_all();
    });
  try {
    if (meanwhile) meanwhile();
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(100));
      if (poll) {
        lock.unlock();
        poll();
        lock.lock();
      }
    }
  } catch (...) {
    stop(std::current_exception());
  }
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace mptrain
