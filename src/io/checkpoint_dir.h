// The on-disk protocol for checkpoints, built so that a process killed (even by SIGKILL) at
// any instant leaves the previous checkpoint intact and resumable:
//
//   run_dir/.step_00000100.partial/   being written; never read, removed by the next
//                                     begin_checkpoint or prune_checkpoints
//   run_dir/step_00000100/            complete: appears only by rename of a fully fsynced
//                                     partial dir, so every step_* dir is whole
//   run_dir/latest                    "step_00000100\n", rewritten atomically after the rename
//
// A checkpoint directory holds at least model.safetensors (that is how resolve_checkpoint
// recognises one); the trainer decides what else goes in it.
#pragma once
#include <cstdint>
#include <string>

namespace mptrain {

inline constexpr const char* kCheckpointModelFile = "model.safetensors";
inline constexpr const char* kCheckpointLatestFile = "latest";

// "step_00000100". Throws Error for a negative step.
std::string checkpoint_name(int64_t step);

// Creates run_dir if needed, removes any stale run_dir/.step_XXXXXXXX.partial/ and creates it
// afresh; returns its path. Write the checkpoint's files there, then commit_checkpoint().
std::string begin_checkpoint(const std::string& run_dir, int64_t step);

// fsyncs every file in the partial dir and the dir itself, renames it to step_XXXXXXXX
// (an existing dir of that name is swapped out atomically where the file system allows,
// else moved aside first), atomically rewrites run_dir/latest to name it, fsyncs run_dir.
// Throws Error if begin_checkpoint was not called for this step.
void commit_checkpoint(const std::string& run_dir, int64_t step);

// path is either a checkpoint dir (contains model.safetensors), returned as is, or a run dir:
// the checkpoint its 'latest' names, or, if 'latest' is missing or names no complete
// checkpoint (a kill between the rename and the pointer update), the highest-step complete
// step_* dir. Partial dirs are never returned. Throws Error saying what was expected.
std::string resolve_checkpoint(const std::string& path);

// Keeps the keep_last highest-step complete checkpoints plus the one 'latest' names (never
// removed), removes the other complete ones and any leftovers of interrupted runs (.partial
// dirs, dirs moved aside, temporary 'latest' files). keep_last = 0 keeps only 'latest'.
// Directories are renamed to a hidden name before deletion, so a kill mid-delete never
// leaves a half-deleted step_* dir that looks complete.
void prune_checkpoints(const std::string& run_dir, int keep_last);

}  // namespace mptrain
