#include "engine/model/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "engine/common/error.h"
#include "tests/test_util.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

const std::string kCorpus = std::string(KVBENCH_SOURCE_DIR) + "/tests/data/safetensors";

struct BadCase {
  const char* file;      // under tests/data/safetensors, without ".safetensors"
  const char* tensor;    // must be named in the message, "" when none is involved
  const char* fragment;  // a piece of the expected message
};

// One row per bad_* file written by tests/data/safetensors/make_corpus.py.
const BadCase kBadCases[] = {
    {"bad_empty", "", "shorter than 8 bytes"},
    {"bad_too_short", "", "shorter than 8 bytes"},
    {"bad_header_beyond_file", "", "runs past the end of the file"},
    {"bad_header_huge", "", "limit"},
    {"bad_header_not_json", "", "not valid JSON"},
    {"bad_header_invalid_utf8", "", "not valid JSON"},
    {"bad_header_not_object", "", "not an object"},
    {"bad_number_overflow", "", "a number is out of range"},
    {"bad_deep_nesting", "", "not an object"},
    {"bad_entry_not_object", "model.bad", "must be an object"},
    {"bad_missing_dtype", "model.bad", "missing 'dtype'"},
    {"bad_missing_shape", "model.bad", "missing 'shape'"},
    {"bad_missing_offsets", "model.bad", "missing 'data_offsets'"},
    {"bad_dtype_not_string", "model.bad", "'dtype' must be a string"},
    {"bad_shape_not_array", "model.bad", "'shape' must be an array"},
    {"bad_shape_float_dim", "model.bad", "'shape' must be an array of integers"},
    {"bad_negative_dim", "model.bad", "negative dimension"},
    {"bad_dim_too_large", "model.bad", "too large"},
    {"bad_unsupported_dtype", "model.bad", "unsupported dtype 'I64'"},
    {"bad_offsets_one_value", "model.bad", "'data_offsets' must be [begin, end]"},
    {"bad_offsets_negative", "model.bad", "'data_offsets' must be [begin, end]"},
    {"bad_offsets_not_integers", "model.bad", "'data_offsets' must be [begin, end]"},
    {"bad_begin_after_end", "model.bad", "begin 8 > end 0"},
    {"bad_end_beyond_data", "model.bad", "beyond the data section"},
    {"bad_byte_count", "model.bad", "span 8 bytes but shape and dtype need 12"},
    {"bad_shape_overflow", "model.bad", "overflows"},
    {"bad_overlap", "model.a' and 'model.b", "overlapping"},
    {"bad_gap", "model.b", "leaves bytes 8..12 of the data section in no tensor"},
    {"bad_trailing_bytes", "", "tensors end at byte 8 (the end of 'model.a') of the data section but it has 12 bytes"},
    {"bad_empty_inside", "model.e", "data_offsets begin 4 lies inside 'model.a' (0..8)"},
    {"bad_metadata_not_object", "", "'__metadata__' must be an object of strings"},
    {"bad_metadata_value_not_string", "", "'__metadata__' must be an object of strings"},
};

std::string corpus_file(const std::string& stem) { return kCorpus + "/" + stem + ".safetensors"; }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The InputError message `fn` throws; fails the test when it throws nothing.
template <class Fn>
std::string input_error_of(Fn fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError thrown";
  return "";
}

TEST(SafetensorsCorpus, EveryBadFileHasAnExpectation) {
  std::set<std::string> expected, found;
  for (const BadCase& c : kBadCases) expected.insert(c.file);
  for (const auto& f : fs::directory_iterator(kCorpus)) {
    std::string stem = f.path().stem().string();
    if (f.path().extension() == ".safetensors" && stem.rfind("bad_", 0) == 0) found.insert(stem);
  }
  EXPECT_EQ(found, expected) << "regenerate with tests/data/safetensors/make_corpus.py";
}

TEST(SafetensorsCorpus, BadFilesRaiseInputErrorNamingFileAndTensor) {
  for (const BadCase& c : kBadCases) {
    SCOPED_TRACE(c.file);
    std::string path = corpus_file(c.file);
    std::string msg = input_error_of([&] { SafetensorsFile::open(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    if (*c.tensor) {
      EXPECT_NE(msg.find(std::string("'") + c.tensor + "'"), std::string::npos) << msg;
    }
    EXPECT_NE(msg.find(c.fragment), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
    // The pure parser says the same about the same bytes.
    std::vector<uint8_t> bytes = read_bytes(path);
    EXPECT_EQ(input_error_of([&] { parse_safetensors(bytes.data(), bytes.size(), path); }), msg);
  }
}

TEST(SafetensorsCorpus, ValidFilesParse) {
  auto empty = SafetensorsFile::open(corpus_file("valid_empty"));
  EXPECT_TRUE(empty->entries().empty());

  auto file = SafetensorsFile::open(corpus_file("valid_mixed"));
  ASSERT_EQ(file->entries().size(), 4u);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  const TensorEntry& f16 = file->entries().at("b.f16");
  EXPECT_EQ(f16.dtype, "F16");
  EXPECT_EQ(f16.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(f16.begin, 8u);
  EXPECT_EQ(f16.end, 16u);
  // Data bytes are 0, 1, 2, ...: a.f32 holds bytes 0..7.
  std::vector<uint8_t> raw{0, 1, 2, 3, 4, 5, 6, 7};
  at::Tensor expect = at::from_blob(raw.data(), {2}, at::kFloat).clone();
  EXPECT_TRUE(at::equal(file->load("a.f32"), expect));
  EXPECT_EQ(file->load("d.empty").sizes(), (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(file->load("c.bf16", at::kBFloat16).scalar_type(), at::kBFloat16);

  auto between = SafetensorsFile::open(corpus_file("valid_empty_between"));
  EXPECT_EQ(between->entries().size(), 4u);
  EXPECT_EQ(between->load("e.between").sizes(), (std::vector<int64_t>{0, 3}));
}

TEST(Safetensors, RoundTripsF32F16BF16) {
  test::TempDir dir;
  std::string path = dir.file("model.safetensors");
  at::manual_seed(0);
  std::map<std::string, at::Tensor> tensors = {
      {"f32", at::randn({3, 5})},
      {"f16", at::randn({4, 2}).to(at::kHalf)},
      {"bf16", at::randn({7}).to(at::kBFloat16)},
      {"transposed", at::randn({2, 3}).t()},  // written contiguous
      {"scalar", at::scalar_tensor(2.5)}};
  write_safetensors(path, tensors, {{"format", "pt"}});
  EXPECT_FALSE(fs::exists(path + ".tmp"));

  auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_EQ(file->entries().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    at::Tensor same = file->load(name, t.scalar_type());
    EXPECT_EQ(same.scalar_type(), t.scalar_type());
    EXPECT_TRUE(at::equal(same, t));
    EXPECT_TRUE(at::equal(file->load(name), t.to(at::kFloat)));  // widened to f32 exactly
  }
  // The header is space-padded so the data section starts 8-aligned.
  std::vector<uint8_t> bytes = read_bytes(path);
  EXPECT_EQ(bytes[0] % 8, 0);
}

TEST(Safetensors, LoadCopiesOutOfTheMapping) {
  test::TempDir dir;
  std::string path = dir.file("m.safetensors");
  write_safetensors(path, {{"w", at::ones({4})}});
  at::Tensor w;
  {
    auto file = SafetensorsFile::open(path);
    w = file->load("w", at::kFloat);
  }  // unmapped here
  EXPECT_TRUE(at::equal(w, at::ones({4})));
}

TEST(Safetensors, MissingTensorNamesFileAndTensor) {
  test::TempDir dir;
  std::string path = dir.file("m.safetensors");
  write_safetensors(path, {{"w", at::ones({4})}});
  auto file = SafetensorsFile::open(path);
  EXPECT_FALSE(file->contains("lm_head.weight"));
  std::string msg = input_error_of([&] { file->load("lm_head.weight"); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("'lm_head.weight'"), std::string::npos) << msg;
}

TEST(Safetensors, MissingFileNamesFile) {
  std::string path = "/nonexistent/dir/model.safetensors";
  std::string msg = input_error_of([&] { SafetensorsFile::open(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

TEST(Safetensors, WriteRejectsUnsupportedDtypeAndWritesNothing) {
  test::TempDir dir;
  std::string path = dir.file("m.safetensors");
  std::string msg = input_error_of(
      [&] { write_safetensors(path, {{"ok", at::ones({2})}, {"ids", at::arange(3)}}); });
  EXPECT_NE(msg.find("'ids'"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(Safetensors, Stories260KMatchesItsReadme) {
  KVB_REQUIRE_STORIES260K(dir);
  auto file = SafetensorsFile::open(dir + "/model.safetensors");
  const auto& e = file->entries();
  EXPECT_EQ(e.size(), 2u + 5u * 9u);  // embeddings, final norm, 9 tensors per layer
  EXPECT_FALSE(file->contains("lm_head.weight"));  // tied to the embeddings
  using Shape = std::vector<int64_t>;
  EXPECT_EQ(e.at("model.embed_tokens.weight").shape, (Shape{512, 64}));
  EXPECT_EQ(e.at("model.norm.weight").shape, (Shape{64}));
  for (int layer = 0; layer < 5; ++layer) {
    std::string p = "model.layers." + std::to_string(layer) + ".";
    SCOPED_TRACE(p);
    EXPECT_EQ(e.at(p + "self_attn.q_proj.weight").shape, (Shape{64, 64}));   // 8 heads x 8
    EXPECT_EQ(e.at(p + "self_attn.k_proj.weight").shape, (Shape{32, 64}));   // 4 KV heads x 8
    EXPECT_EQ(e.at(p + "self_attn.v_proj.weight").shape, (Shape{32, 64}));
    EXPECT_EQ(e.at(p + "self_attn.o_proj.weight").shape, (Shape{64, 64}));
    EXPECT_EQ(e.at(p + "mlp.gate_proj.weight").shape, (Shape{172, 64}));
    EXPECT_EQ(e.at(p + "mlp.up_proj.weight").shape, (Shape{172, 64}));
    EXPECT_EQ(e.at(p + "mlp.down_proj.weight").shape, (Shape{64, 172}));
    EXPECT_EQ(e.at(p + "input_layernorm.weight").shape, (Shape{64}));
    EXPECT_EQ(e.at(p + "post_attention_layernorm.weight").shape, (Shape{64}));
  }
  for (const auto& [name, t] : e) EXPECT_EQ(t.dtype, "F32") << name;
  at::Tensor emb = file->load("model.embed_tokens.weight");
  EXPECT_EQ(emb.sizes(), (at::IntArrayRef{512, 64}));
  EXPECT_TRUE(emb.isfinite().all().item<bool>());
  EXPECT_GT(emb.abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace kvb
