#include "engine/common/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/test_util.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

TEST(RemoveTree, RemovesNestedFoldersAndLinksButNotLinkTargets) {
  test::TempDir dir;
  const std::string root = dir.file("tree"), outside = dir.file("outside");
  fs::create_directories(root + "/a/b/c");
  fs::create_directories(outside);
  std::ofstream(root + "/top.txt") << "x";
  std::ofstream(root + "/a/b/c/deep.bin") << "y";
  std::ofstream(outside + "/keep.txt") << "z";
  ASSERT_EQ(symlink(outside.c_str(), (root + "/a/link").c_str()), 0);
  EXPECT_TRUE(remove_tree(root));
  EXPECT_FALSE(fs::exists(root));
  EXPECT_TRUE(fs::exists(outside + "/keep.txt"));  // the link was not followed
}

TEST(RemoveTree, SingleFileAndMissingPath) {
  test::TempDir dir;
  std::ofstream(dir.file("f")) << "x";
  EXPECT_TRUE(remove_tree(dir.file("f")));
  EXPECT_FALSE(fs::exists(dir.file("f")));
  EXPECT_TRUE(remove_tree(dir.file("never-there")));
}

}  // namespace
}  // namespace kvb
