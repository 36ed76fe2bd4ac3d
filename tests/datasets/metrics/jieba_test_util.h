// Helpers for the tests that compare kvbench's jieba segmentation and Chinese LongBench metrics
// with Debian's python3-jieba: its availability (installed on the fly when running as root),
// running a Python script, and deterministic Chinese-like test text (there is no Chinese
// corpus offline).
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/metrics/jieba.h"
#include "tests/test_util.h"

namespace kvb::test {

// Debian's interpreter: `python3` on PATH may be another one, without jieba.
inline constexpr const char* kSystemPython = "/usr/bin/python3";

inline bool python_jieba_importable() {
  const std::string cmd = std::string(kSystemPython) + " -c 'import jieba' >/dev/null 2>&1";
  return std::filesystem::exists(kSystemPython) && std::system(cmd.c_str()) == 0;
}

// "" when python3-jieba (the Python module and its dict.txt) is there, installing it first
// when missing and running as root; otherwise why the tests that need it skip.
inline const std::string& python_jieba_missing_reason() {
  static const std::string reason = []() -> std::string {
    auto ready = [] { return python_jieba_importable() && std::filesystem::exists(kDebianJiebaDict); };
    if (ready()) return "";
    if (geteuid() != 0)
      return "skipped: python3-jieba is not installed and this is not root (apt-get install "
             "python3-jieba)";
    const int rc = std::system(
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-jieba >/dev/null 2>&1");
    if (ready()) return "";
    return "skipped: python3-jieba is missing and `apt-get install -y -qq python3-jieba` failed "
           "(exit status " + std::to_string(rc) + ")";
  }();
  return reason;
}

#define KVB_REQUIRE_PYTHON_JIEBA()                                                     \
  if (const std::string& why = ::kvb::test::python_jieba_missing_reason(); !why.empty()) \
  GTEST_SKIP() << why

// Only the C++ side: Debian's dictionary and HMM files.
#define KVB_REQUIRE_JIEBA_DICT()                                                          \
  if (!std::filesystem::exists(::kvb::kDebianJiebaDict))                                  \
  GTEST_SKIP() << "skipped: " << ::kvb::kDebianJiebaDict                                  \
               << " is absent (apt-get install python3-jieba)"

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `script` (Python source) with /usr/bin/python3 in `dir`, arguments appended as they
// are (no spaces in them). Returns "" on success, else the exit status and stderr; jieba's
// "Building prefix dict" chatter on stderr is ignored when it succeeds.
inline std::string run_python(const TempDir& dir, const std::string& script,
                              const std::vector<std::string>& args) {
  std::ofstream(dir.file("script.py")) << script;
  std::string cmd = std::string(kSystemPython) + " " + dir.file("script.py");
  for (const std::string& a : args) cmd += " " + a;
  cmd += " 2>" + dir.file("python.stderr");
  const int rc = std::system(cmd.c_str());
  if (rc == 0) return "";
  return "python exited with status " + std::to_string(rc) + ": " +
         read_text_file(dir.file("python.stderr"));
}

// splitmix64: the same numbers on every platform (std:: distributions are not).
class TestRng {
 public:
  explicit TestRng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return size_t(next() % n); }
  bool chance(double p) { return double(next() >> 11) * 0x1.0p-53 < p; }

 private:
  uint64_t state_;
};

// The words of jieba's dict.txt (first field of each line).
inline std::vector<std::string> jieba_dict_words(const std::string& path = kDebianJiebaDict) {
  std::ifstream in(path);
  std::vector<std::string> words;
  for (std::string line; std::getline(in, line);) words.push_back(line.substr(0, line.find(' ')));
  return words;
}

inline std::string utf8(char32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

// One piece of test text: mostly dictionary words and CJK characters (most of U+4E00..U+9FD5
// is rare or absent from the dictionary, so runs of them take the HMM path), with Chinese and
// ASCII punctuation, numbers (decimals, percentages), Latin words, whitespace of every kind
// jieba treats specially, full-width forms and characters outside jieba's han range.
inline std::string random_piece(TestRng& rng, const std::vector<std::string>& words) {
  static const std::vector<std::string> punct = {
      "，", "。", "！", "？", "、", "；", "：", "“", "”", "‘", "’", "（", "）", "《", "》",
      "【", "】", "…", "—", "·", "～", "「", "」", ".", ",", "!", "?", ";", ":", "'",
      "\"", "(", ")", "-", "+", "#", "&", "_", "%", "/", "@"};
  static const std::vector<std::string> latin = {
      "hello", "World", "GPU", "iPhone", "abc123", "x", "C++", "c#", "AT&T", "e.g", "A", "THE"};
  static const std::vector<std::string> space = {" ", "  ", "\t", "\n", "\r\n", "\r", "\u3000"};
  static const std::vector<std::string> other = {
      "Ａ", "１２", "ｈｅｌｌｏ", "ＧＰＵ", "，", "！", "\u9fd6", "\u3400", "\U00020000",
      "\U0001F600", "é", "Ω", "İ", "Ⅲ"};
  const size_t kind = rng.below(100);
  if (kind < 45) return words[rng.below(words.size())];
  if (kind < 65) return utf8(char32_t(0x4E00 + rng.below(0x9FD5 - 0x4E00 + 1)));
  if (kind < 75) return punct[rng.below(punct.size())];
  if (kind < 80) {
    static const std::vector<std::string> tails = {"", ".5", "%", ".25%", "."};
    return std::to_string(rng.below(100000)) + tails[rng.below(tails.size())];
  }
  if (kind < 85) return latin[rng.below(latin.size())];
  if (kind < 90) return space[rng.below(space.size())];
  if (kind < 95) return other[rng.below(other.size())];
  std::string run;  // several rare characters in a row
  for (size_t n = 2 + rng.below(5); n > 0; --n) run += utf8(char32_t(0x4E00 + rng.below(0x51D6)));
  return run;
}

inline std::string random_text(TestRng& rng, const std::vector<std::string>& words,
                               size_t max_pieces) {
  std::string out;
  for (size_t n = 1 + rng.below(max_pieces); n > 0; --n) out += random_piece(rng, words);
  return out;
}

}  // namespace kvb::test
