// Unicode NFC (nfc.h): hand-written cases, Unicode's own conformance file
// (NormalizationTest.txt, Debian package unicode-data), and the {"type": "NFC"} normaliser.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizer/nfc.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "tests/engine/tokenizer/fixtures.h"

namespace kvb {
namespace {

using unicode::nfc;

TEST(Nfc, LeavesTextBelowU0300Alone) {
  for (const char* text : {"", "plain ASCII, 123!", "caf\u00e9 \u00c5ngstr\u00f6m \u00ff\u02ff"}) {
    EXPECT_EQ(nfc(text), text);
  }
}

TEST(Nfc, Composes) {
  EXPECT_EQ(nfc("e\u0301"), "\u00e9");
  EXPECT_EQ(nfc("cafe\u0301 ok"), "caf\u00e9 ok");
  // Two steps: a + U+0323 -> U+1EA1, then + U+0302 -> U+1EAD, whatever the marks' order.
  EXPECT_EQ(nfc("a\u0323\u0302"), "\u1ead");
  EXPECT_EQ(nfc("a\u0302\u0323"), "\u1ead");
  // Japanese voiced sound mark.
  EXPECT_EQ(nfc("\u304b\u3099"), "\u304c");
}

TEST(Nfc, ReordersMarksByCombiningClass) {
  // Dot below (class 220) composes with D; dot above (230) then has no composite with U+1E0C.
  EXPECT_EQ(nfc("\u1e0b\u0323"), "\u1e0d\u0307");
  EXPECT_EQ(nfc("D\u0307\u0323"), "\u1e0c\u0307");
}

TEST(Nfc, BlockedMarksStay) {
  // The second acute is blocked by the first (same class), which composed with the a.
  EXPECT_EQ(nfc("a\u0301\u0301"), "\u00e1\u0301");
  // A mark with no starter before it has nothing to compose with.
  EXPECT_EQ(nfc("\u0301e"), "\u0301e");
  // A starter in between blocks.
  EXPECT_EQ(nfc("e-\u0301"), "e-\u0301");
}

TEST(Nfc, Hangul) {
  EXPECT_EQ(nfc("\u1100\u1161\u11a8"), "\uac01");  // L + V + T
  EXPECT_EQ(nfc("\u1100\u1161"), "\uac00");        // L + V
  EXPECT_EQ(nfc("\uac00\u11a8"), "\uac01");        // LV + T
  EXPECT_EQ(nfc("\uac01"), "\uac01");
  EXPECT_EQ(nfc("\uac01\u11a8"), "\uac01\u11a8");  // LVT takes no second T
  EXPECT_EQ(nfc("\uac00\u11a7"), "\uac00\u11a7");  // U+11A7 is below the first T
}

TEST(Nfc, ExclusionsAndSingletons) {
  EXPECT_EQ(nfc("\u0958"), "\u0915\u093c");        // composition exclusion: stays decomposed
  EXPECT_EQ(nfc("\u0915\u093c"), "\u0915\u093c");
  EXPECT_EQ(nfc("\u212b"), "\u00c5");              // ANGSTROM SIGN, a singleton
  EXPECT_EQ(nfc("\u2126"), "\u03a9");              // OHM SIGN
  EXPECT_EQ(nfc("\uf900"), "\u8c48");              // CJK compatibility ideograph
  EXPECT_EQ(nfc("\u0344"), "\u0308\u0301");        // non-starter decomposition
  EXPECT_EQ(nfc("\u65e5\u672c\u8a9e \U0001F600"), "\u65e5\u672c\u8a9e \U0001F600");
}

TEST(Nfc, KeepsInvalidUtf8Bytes) {
  // An invalid byte is kept and, like U+FFFD, is a starter that composes with nothing.
  EXPECT_EQ(nfc("\xff" "e\u0301"), "\xff\u00e9");
  EXPECT_EQ(nfc("e\xff\u0301"), "e\xff\u0301");
  EXPECT_EQ(nfc("e\u0301\xcc"), "\u00e9\xcc");  // truncated sequence at the end
  EXPECT_EQ(nfc("\xed\xa0\x80\u0301"), "\xed\xa0\x80\u0301");  // encoded surrogate
  EXPECT_EQ(nfc("\ufffd\u0301"), "\ufffd\u0301");
}

// ---- NormalizationTest.txt ----

constexpr const char* kNormalizationTest = "/usr/share/unicode/NormalizationTest.txt";

// The file's lines. Debian ships it bzip2-compressed, so NormalizationTest.txt.bz2 is read
// through `bzip2 -dc` (bzip2 comes with build-essential) when the plain file is not there.
std::vector<std::string> normalization_test_lines(const std::string& path) {
  std::string text;
  if (std::filesystem::exists(path)) {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(("bzip2 -dc " + path + ".bz2").c_str(), "r"),
                                               pclose);
    char buf[1 << 16];
    for (size_t n; pipe && (n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0;) {
      text.append(buf, n);
    }
  }
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "1E0A 0323" -> its UTF-8.
std::string utf8_of(const std::string& hex_code_points) {
  std::istringstream in(hex_code_points);
  std::string out;
  for (std::string hex; in >> hex;) unicode::append_utf8(std::stoul(hex, nullptr, 16), &out);
  return out;
}

std::string hex_of(const std::string& utf8) {
  std::string out;
  for (size_t pos = 0; pos < utf8.size();) {
    char32_t cp;
    pos += unicode::decode_utf8(utf8, pos, &cp);
    char buf[16];
    std::snprintf(buf, sizeof buf, "%s%04X", out.empty() ? "" : " ", static_cast<unsigned>(cp));
    out += buf;
  }
  return out;
}

// Counts mismatches; reports the first few in full, so a wrong table does not flood the log.
struct Mismatches {
  int count = 0;
  void check(const std::string& got, const std::string& want, const std::string& what) {
    if (got == want) return;
    if (++count <= 20) {
      ADD_FAILURE() << what << ": got " << hex_of(got) << ", want " << hex_of(want);
    }
  }
};

TEST(NfcNormalizationTest, UnicodeConformance) {
  const std::string path = kNormalizationTest;
  if (!std::filesystem::exists(path) && !std::filesystem::exists(path + ".bz2")) {
    GTEST_SKIP() << "skipped: " << path << " absent (Debian package unicode-data)";
  }
  const std::vector<std::string> lines = normalization_test_lines(path);
  ASSERT_FALSE(lines.empty()) << "could not read " << path << " (or its .bz2 through bzip2)";
  std::smatch version;
  const std::regex header(R"(NormalizationTest-([0-9.]+)\.txt)");
  ASSERT_TRUE(std::regex_search(lines[0], version, header)) << lines[0];
  if (version[1] != unicode::kNfcUnicodeVersion) {
    // Characters new in the file's version would fail; the tables need regenerating.
    GTEST_SKIP() << "skipped: " << path << " is Unicode " << version[1]
                 << ", nfc_tables.cpp is Unicode " << unicode::kNfcUnicodeVersion
                 << " (rerun engine/tokenizer/gen_nfc_tables.py)";
  }

  Mismatches bad;
  std::set<char32_t> part1;  // code points Part 1 lists
  std::string part;
  std::map<std::string, int> checked;  // lines per part
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '@') {
      part = line.substr(1, line.find(' ') - 1);
      continue;
    }
    std::vector<std::string> c;  // c[1]..c[5] as the file's header names them
    c.emplace_back();
    std::istringstream fields(line);
    for (std::string field; c.size() < 6 && std::getline(fields, field, ';');) {
      c.push_back(utf8_of(field));
    }
    ASSERT_EQ(c.size(), 6u) << "line " << i + 1 << ": " << line;
    const std::string where = "line " + std::to_string(i + 1) + " (" + part + ")";
    // c2 == toNFC(c1) == toNFC(c2) == toNFC(c3); c4 == toNFC(c4) == toNFC(c5)
    for (int k : {1, 2, 3}) bad.check(nfc(c[k]), c[2], where + " NFC(c" + std::to_string(k) + ")");
    for (int k : {4, 5}) bad.check(nfc(c[k]), c[4], where + " NFC(c" + std::to_string(k) + ")");
    ++checked[part];
    if (part == "Part1") part1.insert(std::stoul(line.substr(0, line.find(';')), nullptr, 16));
  }
  EXPECT_GT(checked["Part1"], 10000);
  EXPECT_GT(part1.size(), 10000u);

  // Every code point Part 1 does not list is its own NFC (checked for all of them, assigned or
  // not; surrogates have no UTF-8 form).
  int unlisted = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || part1.count(cp)) continue;
    std::string x;
    unicode::append_utf8(cp, &x);
    bad.check(nfc(x), x, "code point " + hex_of(x) + " (not in Part 1)");
    ++unlisted;
  }
  EXPECT_EQ(bad.count, 0);
  std::cout << path << " (Unicode " << version[1] << "): lines checked:";
  for (const auto& [name, count] : checked) std::cout << " " << name << " " << count;
  std::cout << "; " << unlisted << " code points outside Part 1 checked\n";
}

// ---- the {"type": "NFC"} normaliser ----

TEST(NormalizerNfc, ComposesDecomposedText) {
  const auto normalizer = tok::Normalizer::from_json({{"type", "NFC"}}, "tokenizer.json");
  EXPECT_EQ(normalizer.apply("e\u0301"), "\u00e9");
  EXPECT_EQ(normalizer.apply("plain"), "plain");
  // In a Sequence, after a Replace that makes the composable pair.
  const auto sequence = tok::Normalizer::from_json(
      {{"type", "Sequence"},
       {"normalizers",
        {{{"type", "Replace"}, {"pattern", {{"String", "'"}}}, {"content", "\u0301"}},
         {{"type", "NFC"}}}}},
      "tokenizer.json");
  EXPECT_EQ(sequence.apply("cafe'"), "caf\u00e9");
}

TEST(NormalizerNfc, ChangesTokenIds) {
  // The byte-level fixture merges "é" (U+00E9, bytes C3 A9) into id 259.
  nlohmann::json t = tokenizer_test::byte_level_tokenizer_json(false);
  const nlohmann::json config = {{"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"}};
  EXPECT_EQ(Tokenizer::from_json(t, config, "gpt2")->encode("e\u0301", false),
            (std::vector<int>{'e', 0xCC, 0x81}));
  t["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(Tokenizer::from_json(t, config, "gpt2")->encode("e\u0301", false),
            std::vector<int>{259});
}

}  // namespace
}  // namespace kvb
