// Per-file checksums for directories another run will trust (checkpoints): a manifest
// "checksums.json" beside the files, {"algorithm": "xxh3-64", "files": {"<name>": "<16 hex>"}},
// written after the files and checked before any of them is read. XXH3-64 (Debian's
// libxxhash) hashes at memory speed, so verifying a 1.5 GB GPT-2 checkpoint costs a fraction of
// a second from the page cache; it detects corruption (bit rot, truncation, a stray edit), not
// tampering (it is not a cryptographic hash).
#pragma once
#include <cstdint>
#include <string>

namespace mptrain {

inline constexpr const char* kChecksumManifestFile = "checksums.json";
inline constexpr const char* kChecksumAlgorithm = "xxh3-64";

// XXH3-64 of a file's bytes, streamed in blocks (bounded memory, one file handle).
// Throws Error naming the path if it cannot be read.
uint64_t file_checksum(const std::string& path);

// "0123456789abcdef": 16 lower-case hex digits.
std::string checksum_hex(uint64_t sum);

// Hashes every regular file directly in dir (except the manifest itself and leftover
// "*.tmp.*" files) and writes dir/checksums.json atomically. Throws Error on any failure.
void write_checksum_manifest(const std::string& dir);

enum class ChecksumStatus {
  Verified,   // every file the manifest lists is present and matches
  NoManifest  // written before checksums existed (or by hand): nothing to verify against
};

// Checks every file dir/checksums.json lists. Throws Error with one line:
//   "checksum mismatch in <file> (checkpoint <dir>)"  a listed file's bytes changed
//   "... <file> listed in checksums.json is missing"  a listed file is gone
//   "... checksums.json ... not valid"                the manifest itself is damaged
// A manifest that does not list `required` (when it exists in dir) is treated as damaged:
// the file every reader loads must never escape the check.
ChecksumStatus verify_checksum_manifest(const std::string& dir, const std::string& required = "");

}  // namespace mptrain
