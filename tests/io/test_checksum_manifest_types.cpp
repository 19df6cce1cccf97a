// checksums.json from someone else's checkpoint with fields of the wrong JSON type: each is the
// usual "checksums.json is not valid" Error, never an nlohmann exception (the algorithm field
// was read with value<std::string>(), which throws type_error for a number; found in the
// hardening audit of the checkpoint JSON readers).
#include <gtest/gtest.h>

#include <string>

#include "common/test_util.h"
#include "core/error.h"
#include "io/checksum.h"
#include "io/fileutil.h"

namespace mptrain {
namespace {

TEST(ChecksumManifestTypes, WrongTypesAreCleanErrors) {
  testing::TempDir tmp;
  const std::string dir = tmp.path();
  write_file_atomic(dir + "/a.json", "{}\n");
  for (const char* manifest : {R"({"algorithm": 5, "files": {}})", R"({"algorithm": null, "files": {}})",
                               R"({"algorithm": ["xxh3-64"], "files": {}})", R"({"files": {}})",
                               R"({"algorithm": "xxh3-64", "files": []})", R"({"algorithm": "xxh3-64", "files": {"a.json": 1}})",
                               R"(["xxh3-64"])", R"("xxh3-64")"}) {
    SCOPED_TRACE(manifest);
    write_file_atomic(dir + "/" + kChecksumManifestFile, manifest);
    try {
      verify_checksum_manifest(dir);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("checksums.json is not valid"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an mptrain::Error: " << e.what();
    }
  }
}

}  // namespace
}  // namespace mptrain
