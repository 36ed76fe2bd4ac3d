// The one rule for where shared material is found: KVBENCH_SHARED, else ../shared beside the
// checkout; ${SHARED} in suites expands to it.
#include "engine/common/shared_folder.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_util.h"

namespace kvb {
namespace {

TEST(SharedFolder, DefaultsToTheFolderBesideTheCheckout) {
  test::ScopedSharedFolder unset(std::nullopt);
  const std::filesystem::path beside =
      std::filesystem::path(KVBENCH_SOURCE_DIR).lexically_normal().parent_path() / "shared";
  EXPECT_EQ(shared_folder(), beside.string());
  EXPECT_NE(shared_folder_hint().find("../shared beside the checkout"), std::string::npos);
  test::ScopedSharedFolder empty(std::string(""));  // set but empty: the default too
  EXPECT_EQ(shared_folder(), beside.string());
}

TEST(SharedFolder, KvbenchSharedPointsElsewhereAsAnAbsolutePath) {
  test::ScopedSharedFolder set(std::string("/data/kv//shared/"));
  EXPECT_EQ(shared_folder(), "/data/kv/shared");
  EXPECT_EQ(expand_shared("${SHARED}/models/stories260K"), "/data/kv/shared/models/stories260K");
  EXPECT_EQ(expand_shared("a ${SHARED} b ${SHARED}"), "a /data/kv/shared b /data/kv/shared");
  EXPECT_EQ(expand_shared("../shared/x"), "../shared/x");  // only the placeholder
  const std::string hint = shared_folder_hint();
  EXPECT_NE(hint.find("/data/kv/shared (from KVBENCH_SHARED)"), std::string::npos) << hint;
  EXPECT_NE(hint.find("set KVBENCH_SHARED"), std::string::npos) << hint;

  test::ScopedSharedFolder relative(std::string("rel/shared"));
  EXPECT_EQ(shared_folder(), (std::filesystem::current_path() / "rel/shared").string());
}

}  // namespace
}  // namespace kvb
