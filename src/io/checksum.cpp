// Checksum manifests: XXH3-64 of each file, streamed through one fixed-size buffer.
#include "io/checksum.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/fileutil.h"

namespace mptrain {

namespace fs = std::filesystem;

namespace {

// 1 MiB: large enough that the hash, not the read calls, sets the speed.
constexpr size_t kBlock = size_t{1} << 20;

struct StateDeleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

std::string in_checkpoint(const std::string& dir) { return " (checkpoint " + dir + ")"; }

}  // namespace

uint64_t file_checksum(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot read '" + path + "': " + std::strerror(errno));
  std::unique_ptr<XXH3_state_t, StateDeleter> state(XXH3_createState());
  if (!state || XXH3_64bits_reset(state.get()) != XXH_OK) {
    ::close(fd);
    throw Error("cannot hash '" + path + "': out of memory");
  }
  std::vector<char> buf(kBlock);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      ::close(fd);
      throw Error("cannot read '" + path + "': " + std::strerror(saved));
    }
    if (n == 0) break;
    XXH3_64bits_update(state.get(), buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return XXH3_64bits_digest(state.get());
}

std::string checksum_hex(uint64_t sum) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(sum));
  return buf;
}

void write_checksum_manifest(const std::string& dir) {
  std::map<std::string, std::string> sums;  // sorted: the same files give the same manifest
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == kChecksumManifestFile || name.find(".tmp.") != std::string::npos) continue;
    if (!it->is_regular_file(ec)) continue;
    sums[name] = checksum_hex(file_checksum(it->path().string()));
  }
  if (ec) throw Error("cannot list '" + dir + "': " + ec.message());
  nlohmann::json files = nlohmann::json::object();
  for (const auto& [name, sum] : sums) files[name] = sum;
  const nlohmann::json manifest = {{"algorithm", kChecksumAlgorithm}, {"files", files}};
  write_file_atomic(dir + "/" + kChecksumManifestFile, manifest.dump(2) + "\n");
}

ChecksumStatus verify_checksum_manifest(const std::string& dir, const std::string& required) {
  const std::string manifest_path = dir + "/" + kChecksumManifestFile;
  std::error_code ec;
  if (!fs::exists(manifest_path, ec)) return ChecksumStatus::NoManifest;
  const std::string damaged = std::string(kChecksumManifestFile) + " is not valid" + in_checkpoint(dir);
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read_file(manifest_path));
  } catch (const nlohmann::json::exception&) {
    throw Error(damaged + ": not JSON");
  }
  // Compared as JSON: value("algorithm", std::string()) threw nlohmann's type_error for a non-string.
  if (!manifest.is_object() || !manifest.contains("algorithm") || manifest["algorithm"] != kChecksumAlgorithm ||
      !manifest.contains("files") || !manifest["files"].is_object())
    throw Error(damaged + ": expected {\"algorithm\": \"" + kChecksumAlgorithm + "\", \"files\": {...}}");
  const nlohmann::json& files = manifest["files"];
  if (!required.empty() && !files.contains(required) && fs::exists(dir + "/" + required, ec))
    throw Error(damaged + ": it does not list " + required);
  for (const auto& [name, value] : files.items()) {
    // Names are plain file names: a manifest must not send the check outside its directory.
    if (!value.is_string() || name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      throw Error(damaged + ": bad entry '" + name + "'");
    const std::string path = dir + "/" + name;
    if (!fs::is_regular_file(path, ec))
      throw Error(name + " listed in " + kChecksumManifestFile + " is missing" + in_checkpoint(dir));
    if (checksum_hex(file_checksum(path)) != value.get<std::string>())
      throw Error("checksum mismatch in " + name + in_checkpoint(dir));
  }
  return ChecksumStatus::Verified;
}

}  // namespace mptrain
