// File-system helpers shared by everything that writes files another run will trust:
// write to a temporary name, flush, fsync, rename over the final name, fsync the directory.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mptrain {

// Writes bytes to path atomically. On any failure throws Error naming path; the
// previous content of path (if any) is untouched.
void write_file_atomic(const std::string& path, const void* data, size_t bytes);
void write_file_atomic(const std::string& path, std::string_view text);

// Whole file into a string; throws Error naming the path if it cannot be read.
std::string read_file(const std::string& path);

// fsync a directory so that renames inside it are durable.
void fsync_dir(const std::string& dir);

}  // namespace mptrain
