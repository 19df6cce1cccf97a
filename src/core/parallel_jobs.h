// Jobs on worker threads with the calling thread kept free: what prepare's encoding (data/prepare.h)
// and its JSON lines parsing (data/corpus_reader.h) both need. Why not OpenMP: the calling thread
// has work of its own while the jobs run (the shards of the block before, the progress display),
// and the fuzz build (clang, fuzz/) has no OpenMP runtime.
#pragma once
#include <cstddef>
#include <functional>

namespace mptrain {

// `threads`, or every core when it is 0 or less.
int worker_threads(int threads);

// Runs work(job, worker) for every job in [0, jobs) on min(worker_threads(threads), jobs) threads,
// each taking the next job as it finishes one (worker < that count: an index for per-thread
// state). Meanwhile the calling thread runs meanwhile() once, then poll() about ten times a second
// until the workers are done. The first exception a job, meanwhile or poll throws stops the jobs
// not yet started and is rethrown once every worker has stopped.
void run_jobs(size_t jobs, int threads, const std::function<void(size_t job, size_t worker)>& work,
              const std::function<void()>& meanwhile = {}, const std::function<void()>& poll = {});

}  // namespace mptrain
