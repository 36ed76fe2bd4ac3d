#include "datasets/metrics/jieba.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "engine/common/error.h"
#include "engine/tokenizer/unicode.h"

namespace kvb {
namespace {

// finalseg's floor for impossible starts, transitions and unseen characters.
constexpr double kMinFloat = -3.14e100;
// The characters finalseg's HMM sees (its re_han, [\u4E00-\u9FD5]).
constexpr char32_t kHanFirst = 0x4E00, kHanLast = 0x9FD5;

constexpr const char* kInstallHint =
    "apt-get install python3-jieba, or name jieba's dict.txt: kvbench score --jieba-dict FILE, "
    "longbench param jieba_dict";

// States in finalseg's order "BMES"; kLetter breaks ties as Python's max over (prob, letter)
// tuples does: the larger letter wins.
enum State { B = 0, M = 1, E = 2, S = 3 };
constexpr char kLetter[4] = {'B', 'M', 'E', 'S'};
// finalseg's PrevStatus: the states that may precede each state.
constexpr std::array<std::array<int, 2>, 4> kPrevStates = {{{E, S}, {M, B}, {B, M}, {S, E}}};

using unicode::to_code_points;
using unicode::to_utf8;

bool is_hmm_han(char32_t c) { return c >= kHanFirst && c <= kHanLast; }
bool is_ascii_alnum(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }

// jieba's re_han_default, [\u4E00-\u9FD5a-zA-Z0-9+#&\._%\-]: the characters of the blocks
// that go through the dictionary.
bool is_block_char(char32_t c) {
  return is_hmm_han(c) || is_ascii_alnum(c) || c == '+' || c == '#' || c == '&' || c == '.' ||
         c == '_' || c == '%' || c == '-';
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": no such file (jieba's data: " + kInstallHint + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ---- the finalseg model files: Python dict literals ("P={'B': {'\u4e00': -3.65, ...}}") ----

struct PyLiteral {
  bool is_dict = false;
  double number = 0;
  std::vector<std::u32string> keys;  // a dict's string keys, in order
  std::vector<PyLiteral> values;
};

class PyLiteralParser {
 public:
  PyLiteralParser(std::string text, std::string path) : s_(std::move(text)), path_(std::move(path)) {}

  // The literal assigned to P.
  PyLiteral parse_assignment() {
    size_t at = s_.rfind("P=", 0) == 0 ? 0 : s_.find("\nP=");  // at the start of a line
    if (at == std::string::npos) fail("no \"P=\" assignment");
    if (s_[at] == '\n') ++at;
    pos_ = at + 2;
    PyLiteral value = parse_value();
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the literal");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(path_ + ": byte " + std::to_string(pos_) + ": " + what +
                     " (expected jieba's finalseg model, a Python dict literal)");
  }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' ||
                                s_[pos_] == '\t'))
      ++pos_;
  }

  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  PyLiteral parse_value() {
    skip_space();
    if (eat('{')) return parse_dict();
    PyLiteral number;
    const char* begin = s_.c_str() + pos_;
    char* end = nullptr;
    number.number = std::strtod(begin, &end);  // correctly rounded, as Python's float literals
    if (end == begin) fail("expected a number or a dict");
    pos_ += size_t(end - begin);
    return number;
  }

  PyLiteral parse_dict() {
    PyLiteral dict;
    dict.is_dict = true;
    while (!eat('}')) {
      dict.keys.push_back(parse_string());
      if (!eat(':')) fail("expected ':'");
      dict.values.push_back(parse_value());
      if (!eat(',')) {
        if (!eat('}')) fail("expected ',' or '}'");
        break;
      }
    }
    return dict;
  }

  std::u32string parse_string() {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == 'u') ++pos_;  // u'...' literals
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) fail("expected a string key");
    const char quote = s_[pos_++];
    std::u32string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_];
      if (c == quote) {
        ++pos_;
        return out;
      }
      if (c != '\\') {
        char32_t cp;
        pos_ += unicode::decode_utf8(s_, pos_, &cp);
        out.push_back(cp);
        continue;
      }
      out.push_back(parse_escape());
    }
  }

  char32_t parse_escape() {
    const char kind = pos_ + 1 < s_.size() ? s_[pos_ + 1] : '\0';
    pos_ += 2;
    const int digits = kind == 'u' ? 4 : kind == 'U' ? 8 : kind == 'x' ? 2 : 0;
    if (digits == 0) {
      switch (kind) {
        case '\\': case '\'': case '"': return char32_t(kind);
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        default: fail("unsupported escape in a string");
      }
    }
    if (pos_ + size_t(digits) > s_.size()) fail("truncated escape");
    const std::string hex = s_.substr(pos_, size_t(digits));
    char* end = nullptr;
    const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
    if (end != hex.c_str() + digits) fail("bad hexadecimal escape");
    pos_ += size_t(digits);
    return char32_t(cp);
  }

  std::string s_, path_;
  size_t pos_ = 0;
};

PyLiteral read_model_file(const std::string& path) {
  return PyLiteralParser(read_file(path), path).parse_assignment();
}

int state_of(const std::u32string& key, const std::string& path) {
  for (int s = 0; s < 4; ++s)
    if (key.size() == 1 && key[0] == char32_t(kLetter[s])) return s;
  throw InputError(path + ": unknown HMM state \"" + to_utf8(key) + "\" (expected B, M, E or S)");
}

const PyLiteral& expect_dict(const PyLiteral& v, const std::string& path) {
  if (!v.is_dict) throw InputError(path + ": expected a dict of the states B, M, E, S");
  return v;
}

// jieba's gen_pfdict: `line.strip()`, then `word, freq = line.split(' ')[:2]`, freq an int.
bool parse_dict_line(std::string line, std::string* word, int64_t* freq) {
  const char* kAsciiSpace = " \t\n\r\v\f";  // what bytes.strip() strips
  const size_t first = line.find_first_not_of(kAsciiSpace);
  if (first == std::string::npos) return false;
  line = line.substr(first, line.find_last_not_of(kAsciiSpace) - first + 1);
  const size_t sp = line.find(' ');
  if (sp == std::string::npos) return false;
  *word = line.substr(0, sp);
  const size_t end = line.find(' ', sp + 1);
  const std::string number = line.substr(sp + 1, end == std::string::npos ? end : end - sp - 1);
  if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) return false;
  *freq = std::strtoll(number.c_str(), nullptr, 10);
  return unicode::utf8_lossy(*word) == *word;  // Python decodes the line as strict UTF-8
}

}  // namespace

JiebaSegmenter::JiebaSegmenter(const std::string& dict_path) {
  load_dictionary(dict_path);
  // The model of the jieba installation the dictionary belongs to (Debian's and pip's layout:
  // jieba/dict.txt beside jieba/finalseg/), else Debian's.
  const std::filesystem::path beside = std::filesystem::path(dict_path).parent_path() / "finalseg";
  const std::string debian =
      (std::filesystem::path(kDebianJiebaDict).parent_path() / "finalseg").string();
  load_hmm(std::filesystem::exists(beside / "prob_emit.py") ? beside.string() : debian);
}

void JiebaSegmenter::load_dictionary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in || !std::filesystem::is_regular_file(path))
    throw InputError(path + ": no such file (jieba's dictionary, needed by the Chinese LongBench "
                     "metrics: " + kInstallHint + ")");
  freq_.assign(1, 0);
  children_.reserve(size_t(1) << 20);  // dict.txt's 349k words make about 600k keys
  int64_t total = 0;
  std::string line, word;
  for (int number = 1; std::getline(in, line); ++number) {
    int64_t freq = 0;
    if (!parse_dict_line(line, &word, &freq))
      throw InputError(path + ":" + std::to_string(number) + ": invalid dictionary entry \"" +
                       unicode::utf8_lossy(line) + "\" (expected \"word frequency [tag]\")");
    total += freq;
    // Every prefix becomes a key (frequency 0 unless it is a word); a repeated word keeps its
    // last frequency while the total counts both, as jieba does.
    int32_t node = 0;
    for (char32_t c : to_code_points(word)) {
      const uint64_t key = (uint64_t(node) << 21) | c;
      const auto it = children_.find(key);
      if (it != children_.end()) {
        node = it->second;
      } else {
        node = children_[key] = int32_t(freq_.size());
        freq_.push_back(0);
      }
    }
    freq_[size_t(node)] = freq;
  }
  if (total <= 0) throw InputError(path + ": holds no words with a frequency");
  log_freq_.resize(freq_.size());
  for (size_t i = 0; i < freq_.size(); ++i) log_freq_[i] = freq_[i] > 0 ? std::log(double(freq_[i])) : 0.0;
  log_total_ = std::log(double(total));
}

void JiebaSegmenter::load_hmm(const std::string& dir) {
  const std::string start_path = dir + "/prob_start.py";
  const PyLiteral start = read_model_file(start_path);
  start_.fill(kMinFloat);
  for (size_t i = 0; i < expect_dict(start, start_path).keys.size(); ++i)
    start_[size_t(state_of(start.keys[i], start_path))] = start.values[i].number;

  const std::string trans_path = dir + "/prob_trans.py";
  const PyLiteral trans = read_model_file(trans_path);
  for (auto& row : trans_) row.fill(kMinFloat);
  for (size_t i = 0; i < expect_dict(trans, trans_path).keys.size(); ++i) {
    const PyLiteral& row = expect_dict(trans.values[i], trans_path);
    const int from = state_of(trans.keys[i], trans_path);
    for (size_t j = 0; j < row.keys.size(); ++j)
      trans_[size_t(from)][size_t(state_of(row.keys[j], trans_path))] = row.values[j].number;
  }

  const std::string emit_path = dir + "/prob_emit.py";
  const PyLiteral emit = read_model_file(emit_path);
  for (auto& column : emit_) column.assign(kHanLast - kHanFirst + 1, kMinFloat);
  for (size_t i = 0; i < expect_dict(emit, emit_path).keys.size(); ++i) {
    const PyLiteral& row = expect_dict(emit.values[i], emit_path);
    std::vector<double>& column = emit_[size_t(state_of(emit.keys[i], emit_path))];
    for (size_t j = 0; j < row.keys.size(); ++j) {
      // Characters outside the HMM's range never reach it; their entries are not needed.
      if (row.keys[j].size() == 1 && is_hmm_han(row.keys[j][0]))
        column[row.keys[j][0] - kHanFirst] = row.values[j].number;
    }
  }
}

int32_t JiebaSegmenter::child(int32_t node, char32_t c) const {
  const auto it = children_.find((uint64_t(node) << 21) | c);
  return it == children_.end() ? -1 : it->second;
}

int64_t JiebaSegmenter::frequency(const std::u32string& word) const {
  int32_t node = 0;
  for (char32_t c : word)
    if ((node = child(node, c)) < 0) return 0;
  return freq_[size_t(node)];
}

int64_t JiebaSegmenter::frequency(const std::string& word) const { return frequency(to_code_points(word)); }

double JiebaSegmenter::emit(int state, char32_t c) const {
  return emit_[size_t(state)][c - kHanFirst];
}

std::vector<std::string> JiebaSegmenter::cut(const std::string& text) const {
  const std::u32string s = to_code_points(text);
  std::vector<std::u32string> tokens;
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    while (j < s.size() && is_block_char(s[j])) ++j;
    if (j > i) {
      cut_han_block(s.substr(i, j - i), tokens);
      i = j;
      continue;
    }
    // Outside the blocks every character is a token of its own, except that "\r\n" is one
    // (re_skip_default matches it first; accurate mode splits the rest character by character).
    const size_t len = s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n' ? 2 : 1;
    tokens.push_back(s.substr(i, len));
    i += len;
  }
  std::vector<std::string> out;
  out.reserve(tokens.size());
  for (const std::u32string& t : tokens) out.push_back(to_utf8(t));
  return out;
}

// jieba's get_DAG + calc + __cut_DAG on one block of N characters.
void JiebaSegmenter::cut_han_block(const std::u32string& block,
                                   std::vector<std::u32string>& out) const {
  const size_t n = block.size();
  // route[i] = (best log probability of block[i:], end of the first word of that split);
  // the sum is evaluated as jieba does, (log(freq) - log(total)) + route[end + 1].
  std::vector<std::pair<double, size_t>> route(n + 1, {0.0, 0});
  for (size_t k = n; k-- > 0;) {
    bool any = false;
    std::pair<double, size_t> best{0.0, k};
    int32_t node = 0;
    for (size_t i = k; i < n && (node = child(node, block[i])) >= 0; ++i) {
      if (freq_[size_t(node)] <= 0) continue;  // a prefix only: not a DAG edge
      const double p = (log_freq_[size_t(node)] - log_total_) + route[i + 1].first;
      // Python's max over (p, i) tuples: on equal p the larger i wins.
      if (!any || p >= best.first) best = {p, i};
      any = true;
    }
    if (!any) best = {(0.0 - log_total_) + route[k + 1].first, k};  // the lone character, freq 1
    route[k] = best;
  }
  // Runs of single characters collect in buf; a run that is not a word goes to the HMM.
  std::u32string buf;
  auto flush = [&] {
    if (buf.size() == 1) out.push_back(buf);
    else if (buf.size() > 1 && frequency(buf) <= 0) cut_unknown(buf, out);
    else for (char32_t c : buf) out.emplace_back(1, c);
    buf.clear();
  };
  for (size_t x = 0; x < n;) {
    const size_t y = route[x].second + 1;
    if (y - x == 1) {
      buf.push_back(block[x]);
    } else {
      flush();
      out.push_back(block.substr(x, y - x));
    }
    x = y;
  }
  flush();
}

// finalseg.cut: HMM segmentation of the runs of U+4E00..U+9FD5; the rest split by its re_skip,
// ([a-zA-Z0-9]+(?:\.\d+)?%?), matches and the text between them each one token.
void JiebaSegmenter::cut_unknown(const std::u32string& buf, std::vector<std::u32string>& out) const {
  size_t pending = 0;  // start of the text not yet emitted (outside the han runs)
  auto emit_pending = [&](size_t end) {
    if (end > pending) out.push_back(buf.substr(pending, end - pending));
  };
  for (size_t i = 0; i < buf.size();) {
    if (is_hmm_han(buf[i])) {
      emit_pending(i);
      size_t j = i;
      while (j < buf.size() && is_hmm_han(buf[j])) ++j;
      cut_hmm(buf.substr(i, j - i), out);
      pending = i = j;
    } else if (is_ascii_alnum(buf[i])) {
      // Only ASCII reaches here: the block characters are ASCII or han.
      size_t j = i;
      while (j < buf.size() && is_ascii_alnum(buf[j])) ++j;
      if (j + 1 < buf.size() && buf[j] == '.' && is_ascii_digit(buf[j + 1])) {
        j += 2;
        while (j < buf.size() && is_ascii_digit(buf[j])) ++j;
      }
      if (j < buf.size() && buf[j] == '%') ++j;
      emit_pending(i);
      out.push_back(buf.substr(i, j - i));
      pending = i = j;
    } else {
      ++i;
    }
  }
  emit_pending(buf.size());
}

// finalseg's viterbi + __cut over one run of han characters.
void JiebaSegmenter::cut_hmm(const std::u32string& han, std::vector<std::u32string>& out) const {
  const size_t n = han.size();
  std::vector<std::array<double, 4>> v(n);
  std::vector<std::array<int, 4>> from(n);  // the best previous state of each (t, state)
  for (int y = 0; y < 4; ++y) v[0][size_t(y)] = start_[size_t(y)] + emit(y, han[0]);
  for (size_t t = 1; t < n; ++t) {
    for (int y = 0; y < 4; ++y) {
      const double em = emit(y, han[t]);
      double best = 0;
      int best_state = -1;
      for (int y0 : kPrevStates[size_t(y)]) {
        const double p = v[t - 1][size_t(y0)] + trans_[size_t(y0)][size_t(y)] + em;
        if (best_state < 0 || p > best || (p == best && kLetter[y0] > kLetter[best_state]))
          best = p, best_state = y0;
      }
      v[t][size_t(y)] = best;
      from[t][size_t(y)] = best_state;
    }
  }
  // The last state is E or S; S on a tie.
  int state = v[n - 1][S] >= v[n - 1][E] ? S : E;
  std::vector<int> states(n);
  for (size_t t = n; t-- > 0;) {
    states[t] = state;
    if (t > 0) state = from[t][size_t(state)];
  }
  // __cut: B opens a word, E closes it, S is a word alone; an unclosed tail is one word.
  size_t begin = 0, next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (states[i] == B) {
      begin = i;
    } else if (states[i] == E) {
      out.push_back(han.substr(begin, i + 1 - begin));
      next = i + 1;
    } else if (states[i] == S) {
      out.push_back(han.substr(i, 1));
      next = i + 1;
    }
  }
  if (next < n) out.push_back(han.substr(next));
}

const JiebaSegmenter& jieba_segmenter(const std::string& dict_path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const JiebaSegmenter>> loaded;
  const std::string path = dict_path.empty() ? std::string(kDebianJiebaDict) : dict_path;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<const JiebaSegmenter>& slot = loaded[path];
  if (!slot) slot = std::make_unique<const JiebaSegmenter>(path);  // a throw leaves it empty
  return *slot;
}

}  // namespace kvb
