// checkpoint_fingerprint: equal for the same files wherever they lie, different when a file the
// loader reads changes (a retrained model, a config, a shard, a sampled block of a large file).
#include "engine/model/checkpoint_fingerprint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/model/llama_model.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

std::string saved(const test::TempDir& tmp, const std::string& name, uint64_t seed,
                  const ModelConfig& config = random_tiny_config(), int shards = 1) {
  const std::string dir = tmp.file(name);
  save_model(*LlamaModel::random(config, seed), dir, shards);
  return dir;
}

// Flips the byte at `offset` of `path`.
void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(offset));
  const char c = char(f.get() ^ 0x5a);
  f.seekp(std::streamoff(offset));
  f.put(c);
}

TEST(CheckpointFingerprint, TheSameFilesAnywhereMatchOtherWeightsDoNot) {
  test::TempDir tmp;
  const std::string a = checkpoint_fingerprint(saved(tmp, "a", 1));
  EXPECT_EQ(a.size(), 19u) << a;  // "v1:" and 16 hex digits
  EXPECT_EQ(a.rfind("v1:", 0), 0u) << a;
  EXPECT_EQ(checkpoint_fingerprint(saved(tmp, "b", 1)), a);
  EXPECT_NE(checkpoint_fingerprint(saved(tmp, "c", 2)), a);
  std::ofstream(tmp.file("b") + "/README.md") << "notes";  // not a file the loader reads
  EXPECT_EQ(checkpoint_fingerprint(tmp.file("b")), a);
  std::ofstream(tmp.file("b") + "/generation_config.json") << "{\"eos_token_id\": 2}";
  EXPECT_NE(checkpoint_fingerprint(tmp.file("b")), a);
}

TEST(CheckpointFingerprint, GeneratedModelsAndNonFoldersHaveNone) {
  EXPECT_EQ(checkpoint_fingerprint("random-tiny"), "");
  EXPECT_EQ(checkpoint_fingerprint("random-llama3-8b"), "");
  test::TempDir tmp;
  EXPECT_EQ(checkpoint_fingerprint(tmp.file("absent")), "");
}

TEST(CheckpointFingerprint, EveryShardCounts) {
  test::TempDir tmp;
  const std::string one = saved(tmp, "one", 1, random_tiny_config(), 3);
  const std::string two = saved(tmp, "two", 2, random_tiny_config(), 3);
  const std::string before = checkpoint_fingerprint(one);
  const std::string shard = "/model-00002-of-00003.safetensors";
  ASSERT_EQ(fs::file_size(one + shard), fs::file_size(two + shard));
  fs::copy_file(two + shard, one + shard, fs::copy_options::overwrite_existing);
  EXPECT_NE(checkpoint_fingerprint(one), before);
}

// A weight file over 8 MiB is read in its first MiB and 256 blocks of 4 KiB spread evenly:
// block i starts at (size - 4096) * i / 255.
TEST(CheckpointFingerprint, ALargeFileIsReadInSpreadBlocks) {
  LlamaShape shape{.layers = 2, .hidden = 512, .ffn = 2048, .heads = 8, .kv_heads = 8,
                   .head_dim = 64, .vocab = 260};
  test::TempDir tmp;
  const std::string dir = saved(tmp, "large", 1, llama_config(shape));
  const std::string weights = dir + "/model.safetensors";
  const uint64_t size = fs::file_size(weights);
  ASSERT_GT(size, 8u << 20);
  const std::string before = checkpoint_fingerprint(dir);
  EXPECT_NE(checkpoint_fingerprint(saved(tmp, "other", 2, llama_config(shape))), before);
  flip_byte(weights, (size - 4096) * 100 / 255 + 10);  // inside block 100
  EXPECT_NE(checkpoint_fingerprint(dir), before);
}

}  // namespace
}  // namespace kvb
