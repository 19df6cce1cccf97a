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
// recognises one); the trainer decides what else goes in it. commit_checkpoint adds
// checksums.json (io/checksum.h), an XXH3-64 per file, which resolve_checkpoint verifies:
// a checkpoint that was damaged after it was written is refused, never loaded.
#pragma once
#include <cstdint>
#include <string>

#include "io/checksum.h"

namespace mptrain {

inline constexpr const char* kCheckpointModelFile = "model.safetensors";
inline constexpr const char* kCheckpointLatestFile = "latest";
// The training state every checkpoint mptrain saves carries (step, data position, scaler…).
inline constexpr const char* kCheckpointStateFile = "state.json";

// "step_00000100". Throws Error for a negative step.
std::string checkpoint_name(int64_t step);

// Creates run_dir if needed, removes any stale run_dir/.step_XXXXXXXX.partial/ and creates it
// afresh; returns its path. Write the checkpoint's files there, then commit_checkpoint().
std::string begin_checkpoint(const std::string& run_dir, int64_t step);

// Writes the partial dir's checksums.json, fsyncs every file in it and the dir itself,
// renames it to step_XXXXXXXX (an existing dir of that name is swapped out atomically where
// the file system allows, else moved aside first), atomically rewrites run_dir/latest to
// name it, fsyncs run_dir.
// Throws Error if begin_checkpoint was not called for this step.
void commit_checkpoint(const std::string& run_dir, int64_t step);

// Removes the partial dir of a save that failed (a full disk: give the space back). Never
// throws: it runs while another error is on its way to the user; a leftover is removed by the
// next begin_checkpoint or prune_checkpoints anyway.
void abort_checkpoint(const std::string& run_dir, int64_t step) noexcept;

// Verifies a checkpoint dir against its checksums.json; throws Error
// "checksum mismatch in <file> (checkpoint <dir>)" (and the like, see io/checksum.h).
// Checkpoints from before checksums have no manifest: NoManifest, nothing verified.
ChecksumStatus verify_checkpoint(const std::string& ckpt_dir);

// path is either a checkpoint dir (contains model.safetensors), returned as is, or a run dir:
// the checkpoint its 'latest' names, or, if 'latest' is missing or names no complete
// checkpoint (a kill between the rename and the pointer update), the highest-step complete
// step_* dir. Partial dirs are never returned. Throws Error saying what was expected.
// The checkpoint returned is verified (verify_checkpoint): a damaged one throws, naming the
// file (and, for a run dir, an older checkpoint to try); one without checksums.json is
// returned with a warning on stderr (written before checksums existed).
std::string resolve_checkpoint(const std::string& path);

// Keeps the keep_last highest-step complete checkpoints plus the one 'latest' names (never
// removed), removes the other complete ones and any leftovers of interrupted runs (.partial
// dirs, dirs moved aside, temporary 'latest' files). keep_last = 0 keeps only 'latest'.
// It also keeps a good checkpoint (one that passes verify_checkpoint, or has no manifest):
// 'latest' when it is good, else the newest good one, so that rotation never deletes the only
// good checkpoint when the newer ones are damaged.
// Directories are renamed to a hidden name before deletion, so a kill mid-delete never
// leaves a half-deleted step_* dir that looks complete.
void prune_checkpoints(const std::string& run_dir, int keep_last);

}  // namespace mptrain
