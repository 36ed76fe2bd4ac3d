// NFC as UAX #15 defines it: full canonical decomposition, canonical ordering of each run of
// non-starters by combining class, then canonical composition. The tables (classes,
// decompositions, composition pairs) are in the generated nfc_tables.cpp.
#include "engine/tokenizer/nfc.h"

#include <algorithm>
#include <vector>

#include "engine/tokenizer/unicode.h"

namespace kvb::unicode {
namespace {

// Hangul syllables decompose and compose algorithmically (Unicode §3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// An invalid UTF-8 byte b travels through the algorithm as kRawByte + b: above U+10FFFF, so
// it has class 0 and no decomposition or composition (like U+FFFD), and is written back as b.
constexpr char32_t kRawByte = 0x110000;

// No code point below U+0300 is changed by NFC or composes with what follows it, and every
// byte of a UTF-8 text whose code points are all below U+0300 is below 0xCC (U+0300 is CC 80).
// gen_nfc_tables.py checks the first half against the tables.
bool below_u0300(std::string_view utf8) {
  return std::all_of(utf8.begin(), utf8.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0xCC; });
}

void decompose(char32_t cp, std::vector<char32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  char32_t first, second;
  if (!canonical_decomposition(cp, &first, &second)) {
    out->push_back(cp);
    return;
  }
  // Single-step mappings nest (U+1E14 -> U+0112 U+0300 -> E U+0304 U+0300).
  decompose(first, out);
  if (second != 0) decompose(second, out);
}

std::vector<char32_t> decompose_text(std::string_view utf8) {
  std::vector<char32_t> cps;
  cps.reserve(utf8.size());
  for (size_t pos = 0; pos < utf8.size();) {
    char32_t cp;
    const size_t len = decode_utf8(utf8, pos, &cp);
    if (cp == kReplacementChar && len == 1) cp = kRawByte + static_cast<unsigned char>(utf8[pos]);
    decompose(cp, &cps);
    pos += len;
  }
  return cps;
}

// Stable-sorts each maximal run of non-starters by combining class.
void canonical_order(std::vector<char32_t>* cps) {
  auto by_class = [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); };
  auto is_starter = [](char32_t cp) { return combining_class(cp) == 0; };
  for (auto it = cps->begin(); it != cps->end();) {
    auto run = std::find_if_not(it, cps->end(), is_starter);
    it = std::find_if(run, cps->end(), is_starter);
    if (it - run > 1) std::stable_sort(run, it, by_class);
  }
}

char32_t compose_pair(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  return primary_composite(first, second);
}

// Canonical composition in place: each character joins the last starter if it is not blocked
// from it (nothing between them is a starter or has a class >= its own) and the pair has a
// primary composite.
void compose(std::vector<char32_t>* cps) {
  std::vector<char32_t>& s = *cps;
  if (s.empty()) return;
  size_t starter = 0;
  // Class of the last character kept; 256 blocks everything until a first starter arrives.
  int last_class = combining_class(s[0]) == 0 ? 0 : 256;
  size_t kept = 1;
  for (size_t i = 1; i < s.size(); ++i) {
    const int cls = combining_class(s[i]);
    // last_class == 0: the last character kept is the starter itself, so s[i] is adjacent.
    if (last_class == 0 || last_class < cls) {
      if (const char32_t composite = compose_pair(s[starter], s[i])) {
        s[starter] = composite;
        continue;
      }
    }
    if (cls == 0) starter = kept;
    last_class = cls;
    s[kept++] = s[i];
  }
  s.resize(kept);
}

std::string encode(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size() * 2);
  for (char32_t cp : cps) {
    if (cp >= kRawByte) {
      out.push_back(static_cast<char>(cp - kRawByte));
    } else {
      append_utf8(cp, &out);
    }
  }
  return out;
}

}  // namespace

std::string nfc(std::string_view utf8) {
  if (below_u0300(utf8)) return std::string(utf8);
  std::vector<char32_t> cps = decompose_text(utf8);
  canonical_order(&cps);
  compose(&cps);
  return encode(cps);
}

}  // namespace kvb::unicode
