// metrics.jsonl records, the writer, trimming on resume, and the peak-RSS reading.
#include "train/metrics.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/fileutil.h"

namespace mptrain {

MetricsRecord& MetricsRecord::put(std::string_view key, std::string value) {
  for (auto& [k, v] : fields_) {
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  }
  fields_.emplace_back(std::string(key), std::move(value));
  return *this;
}

MetricsRecord& MetricsRecord::add(std::string_view key, int64_t value) {
  return put(key, std::to_string(value));
}

MetricsRecord& MetricsRecord::add(std::string_view key, double value) {
  if (!std::isfinite(value)) return put(key, "null");
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  return put(key, buf);
}

MetricsRecord& MetricsRecord::add(std::string_view key, bool value) {
  return put(key, value ? "true" : "false");
}

MetricsRecord& MetricsRecord::add_string(std::string_view key, std::string_view value) {
  return put(key, nlohmann::json(std::string(value)).dump());
}

MetricsRecord& MetricsRecord::set(std::string_view key, double value) { return add(key, value); }

bool MetricsRecord::has(std::string_view key) const {
  for (const auto& [k, v] : fields_)
    if (k == key) return true;
  return false;
}

std::string MetricsRecord::to_json_line() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (i) out += ',';
    out += nlohmann::json(fields_[i].first).dump();
    out += ':';
    out += fields_[i].second;
  }
  out += '}';
  return out;
}

MetricsWriter::MetricsWriter(const std::string& run_dir)
    : path_(run_dir + "/metrics.jsonl"), out_(path_, std::ios::app) {
  if (!out_) throw Error("cannot open '" + path_ + "' for writing");
}

void MetricsWriter::write(const MetricsRecord& record) {
  out_ << record.to_json_line() << '\n';
  out_.flush();
  if (!out_) throw Error("cannot write '" + path_ + "'");
}

void trim_metrics(const std::string& run_dir, int64_t last_step) {
  const std::string path = run_dir + "/metrics.jsonl";
  if (!std::filesystem::exists(path)) return;
  std::istringstream in(read_file(path));
  std::string kept, line;
  bool changed = false;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool keep = j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
                      j["step"].get<int64_t>() <= last_step;
    if (keep) {
      kept += line;
      kept += '\n';
    } else {
      changed = true;
    }
  }
  if (changed) write_file_atomic(path, kept);
}

namespace {

// One "Key: N kB" line of /proc/self/status, in bytes (0 when absent or unreadable).
uint64_t status_bytes(const char* key) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  const std::string format = std::string(key) + ": %llu kB";
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof(line), f)) {
    unsigned long long v = 0;
    if (std::sscanf(line, format.c_str(), &v) == 1) {
      kb = v;
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

}  // namespace

uint64_t peak_rss_bytes() { return status_bytes("VmHWM"); }
uint64_t resident_bytes() { return status_bytes("VmRSS"); }

}  // namespace mptrain
