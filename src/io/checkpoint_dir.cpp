// Checkpoint directories: write into a hidden partial dir, fsync, rename into place, then
// move the 'latest' pointer. Every step that another run could observe is atomic (rename),
// so a kill at any instant leaves a resolvable previous checkpoint.
#include "io/checkpoint_dir.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc, _GNU_SOURCE)
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "io/fileutil.h"

namespace mptrain {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "step_";
constexpr const char* kPartialSuffix = ".partial";
constexpr const char* kAsideSuffix = ".old";
constexpr const char* kTrashPrefix = ".trash.";

std::string partial_name(const std::string& name) { return "." + name + kPartialSuffix; }

// Step number of a "step_<digits>" name, or nullopt.
std::optional<int64_t> parse_checkpoint_name(const std::string& name) {
  const size_t p = std::strlen(kPrefix);
  if (name.size() <= p || name.size() > p + 18 || name.compare(0, p, kPrefix) != 0) return std::nullopt;
  int64_t step = 0;
  for (size_t i = p; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool is_complete(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::is_regular_file(dir / kCheckpointModelFile, ec);
}

[[noreturn]] void fail(const std::string& what, const fs::path& p, const std::error_code& ec) {
  throw Error("cannot " + what + " '" + p.string() + "': " + ec.message());
}

void fsync_path(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) fail("open", p, std::error_code(errno, std::generic_category()));
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  // Some file systems refuse fsync on directories; the data files are what must be durable.
  if (rc != 0 && !directory) fail("fsync", p, std::error_code(saved, std::generic_category()));
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw Error("cannot rename '" + from.string() + "' to '" + to.string() + "': " + std::strerror(errno));
}

// Removes a directory tree, first renaming it to a hidden trash name so that a kill
// mid-delete leaves nothing that looks like a checkpoint.
void remove_tree(const fs::path& run_dir, const fs::path& dir) {
  std::error_code ec;
  fs::path target = dir;
  const std::string name = dir.filename().string();
  if (name.rfind(kTrashPrefix, 0) != 0) {
    target = run_dir / (kTrashPrefix + name + "." + std::to_string(::getpid()));
    fs::remove_all(target, ec);
    if (ec) fail("remove", target, ec);
    rename_or_throw(dir, target);
  }
  fs::remove_all(target, ec);
  if (ec) fail("remove", target, ec);
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// The checkpoint name in run_dir/latest, or "" when there is no such file.
std::string read_latest(const fs::path& run_dir) {
  std::error_code ec;
  fs::path latest = run_dir / kCheckpointLatestFile;
  if (!fs::is_regular_file(latest, ec)) return "";
  return trim(read_file(latest.string()));
}

struct Found {
  int64_t step;
  fs::path path;
};

// Complete step_* checkpoints in run_dir, highest step first.
std::vector<Found> complete_checkpoints(const fs::path& run_dir) {
  std::vector<Found> out;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    auto step = parse_checkpoint_name(it->path().filename().string());
    if (step && is_complete(it->path())) out.push_back(Found{*step, it->path()});
  }
  if (ec) fail("list", run_dir, ec);
  std::sort(out.begin(), out.end(), [](const Found& a, const Found& b) { return a.step > b.step; });
  return out;
}

}  // namespace

std::string checkpoint_name(int64_t step) {
  if (step < 0) throw Error("[checkpoint] step must be >= 0, got " + std::to_string(step));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s%08lld", kPrefix, static_cast<long long>(step));
  return buf;
}

std::string begin_checkpoint(const std::string& run_dir, int64_t step) {
  const fs::path run(run_dir);
  const fs::path partial = run / partial_name(checkpoint_name(step));
  std::error_code ec;
  fs::create_directories(run, ec);
  if (ec) fail("create run directory", run, ec);
  if (fs::exists(partial, ec)) remove_tree(run, partial);
  fs::create_directory(partial, ec);
  if (ec) fail("create", partial, ec);
  return partial.string();
}

void commit_checkpoint(const std::string& run_dir, int64_t step) {
  const fs::path run(run_dir);
  const std::string name = checkpoint_name(step);
  const fs::path partial = run / partial_name(name);
  const fs::path final_dir = run / name;
  std::error_code ec;
  if (!fs::is_directory(partial, ec))
    throw Error("[checkpoint] no partial checkpoint '" + partial.string() +
                "' to commit (call begin_checkpoint first)");

  // The manifest covers the files as written; then every byte is made durable before the
  // rename can publish it.
  write_checksum_manifest(partial.string());
  for (fs::recursive_directory_iterator it(partial, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec))
      fsync_path(it->path(), false);
    else if (it->is_directory(ec))
      fsync_path(it->path(), true);
  }
  if (ec) fail("list", partial, ec);
  fsync_path(partial, true);

  if (!fs::exists(final_dir, ec)) {
    rename_or_throw(partial, final_dir);
  } else if (::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    // Atomic swap: the old checkpoint now sits under the partial name.
    remove_tree(run, partial);
  } else {
    // No atomic exchange on this file system: move the old one aside, then rename. A kill in
    // between leaves 'latest' dangling, which resolve_checkpoint handles by falling back to
    // the highest complete checkpoint.
    const fs::path aside = run / ("." + name + kAsideSuffix);
    if (fs::exists(aside, ec)) remove_tree(run, aside);
    rename_or_throw(final_dir, aside);
    rename_or_throw(partial, final_dir);
    remove_tree(run, aside);
  }
  write_file_atomic((run / kCheckpointLatestFile).string(), name + "\n");  // fsyncs run_dir too
  fsync_dir(run.string());
}

void abort_checkpoint(const std::string& run_dir, int64_t step) noexcept {
  try {
    const fs::path run(run_dir);
    const fs::path partial = run / partial_name(checkpoint_name(step));
    std::error_code ec;
    if (fs::exists(partial, ec)) remove_tree(run, partial);
  } catch (...) {
    // Best effort (see the header): the error being reported matters more.
  }
}

ChecksumStatus verify_checkpoint(const std::string& ckpt_dir) {
  return verify_checksum_manifest(ckpt_dir, kCheckpointModelFile);
}

namespace {

// The chosen checkpoint, verified; for a run dir, a damaged one's error names an older one.
std::string verified(const fs::path& ckpt, const fs::path& run_dir) {
  try {
    // Only a folder that mptrain saved is worth the warning: anything else (a Hugging Face
    // folder handed to the wrong command, say) gets its own, more useful error from the reader.
    if (verify_checkpoint(ckpt.string()) == ChecksumStatus::NoManifest && fs::exists(ckpt / kCheckpointStateFile))
      std::fprintf(stderr,
                   "mptrain: warning: checkpoint %s has no %s (written before checksums); loading it unverified\n",
                   ckpt.c_str(), kChecksumManifestFile);
  } catch (const Error& e) {
    if (run_dir.empty()) throw;
    const int64_t step = parse_checkpoint_name(ckpt.filename().string()).value_or(0);
    for (const Found& f : complete_checkpoints(run_dir))  // newest first: the first older one
      if (f.step < step)
        throw Error(std::string(e.what()) + "; an older checkpoint may be intact: " + f.path.string());
    throw;
  }
  return ckpt.string();
}

}  // namespace

std::string resolve_checkpoint(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (!fs::exists(p, ec)) throw Error("checkpoint path '" + path + "' does not exist");
  const std::string expected = "expected a checkpoint directory (containing " +
                               std::string(kCheckpointModelFile) + ") or a run directory (containing '" +
                               kCheckpointLatestFile + "' and step_* checkpoints)";
  if (!fs::is_directory(p, ec)) throw Error("checkpoint path '" + path + "' is not a directory: " + expected);
  if (is_complete(p)) return verified(p, {});

  const std::string latest = read_latest(p);
  if (!latest.empty() && parse_checkpoint_name(latest) && is_complete(p / latest))
    return verified(p / latest, p);
  std::vector<Found> found = complete_checkpoints(p);
  if (!found.empty()) return verified(found.front().path, p);
  if (!latest.empty())
    throw Error("'" + (p / kCheckpointLatestFile).string() + "' names '" + latest +
                "', which is not a complete checkpoint (no " + kCheckpointModelFile +
                "), and no other step_* checkpoint exists in '" + path + "'");
  throw Error("'" + path + "' holds no checkpoint: " + expected);
}

void prune_checkpoints(const std::string& run_dir, int keep_last) {
  if (keep_last < 0) throw Error("[checkpoint] keep_last must be >= 0, got " + std::to_string(keep_last));
  const fs::path run(run_dir);
  std::error_code ec;
  if (!fs::is_directory(run, ec)) throw Error("cannot prune '" + run_dir + "': not a directory");

  const std::string latest = read_latest(run);
  std::vector<Found> found = complete_checkpoints(run);
  // A good checkpoint survives whatever keep_last says: 'latest' (kept anyway) when it
  // verifies, which is the usual case and costs one read-back of the checkpoint just written
  // (from the page cache); else the newest one that verifies.
  auto good = [](const fs::path& dir) {
    try {
      verify_checkpoint(dir.string());
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  fs::path newest_good;
  if (!latest.empty() && parse_checkpoint_name(latest) && is_complete(run / latest) && good(run / latest)) {
    newest_good = run / latest;
  } else {
    for (const Found& f : found)
      if (good(f.path)) {
        newest_good = f.path;
        break;
      }
  }
  for (size_t i = static_cast<size_t>(keep_last); i < found.size(); ++i) {
    if (found[i].path.filename() == latest || found[i].path == newest_good) continue;
    remove_tree(run, found[i].path);
  }

  // Leftovers of interrupted commits and deletions.
  std::vector<fs::path> leftovers;
  const std::string latest_tmp = std::string(kCheckpointLatestFile) + ".tmp.";
  for (fs::directory_iterator it(run, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool ours = name.rfind(std::string(".") + kPrefix, 0) == 0 &&
                      (ends_with(name, kPartialSuffix) || ends_with(name, kAsideSuffix));
    if (((ours || name.rfind(kTrashPrefix, 0) == 0) && it->is_directory(ec)) ||
        name.rfind(latest_tmp, 0) == 0)
      leftovers.push_back(it->path());
  }
  if (ec) fail("list", run, ec);
  for (const fs::path& p : leftovers) {
    if (fs::is_directory(p, ec)) {
      remove_tree(run, p);
    } else {
      fs::remove(p, ec);
      if (ec) fail("remove", p, ec);
    }
  }
  fsync_dir(run.string());
}

}  // namespace mptrain
