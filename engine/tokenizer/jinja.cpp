// A Jinja2 subset for chat templates: a lexer (whitespace control, trim_blocks, lstrip_blocks),
// a recursive-descent parser with Jinja2's operator precedence, and a tree walker with Python's
// semantics for the values JSON can hold.
#include "engine/tokenizer/jinja.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/tokenizer/unicode.h"

namespace kvb {
namespace {

// Python's dicts keep their keys' order, so the values here do too.
using json = nlohmann::ordered_json;

// The template's errors: "<where>: line N: what".
[[noreturn]] void fail_at(const std::string& where, int line, const std::string& what) {
  throw InputError(where + ": line " + std::to_string(line) + ": " + what);
}

// ---------------------------------------------------------------------------------------------
// Lexing

enum class Tok { kName, kString, kInt, kFloat, kOp };

struct Token {
  Tok type;
  std::string text;  // a name, an operator, a string's decoded value, a number's digits
  int line;
};

// A piece of the template: text, {{ expression }} or {% statement %}, with its tokens.
struct Piece {
  enum Kind { kText, kOutput, kStatement } kind;
  std::string text;
  std::vector<Token> tokens;
  int line;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
 public:
  Lexer(std::string source, std::string where) : src_(std::move(source)), where_(std::move(where)) {
    // Jinja2 reads \r\n and \r as \n and drops one trailing newline (keep_trailing_newline).
    std::string normal;
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\r') {
        normal += '\n';
        if (i + 1 < src_.size() && src_[i + 1] == '\n') ++i;
      } else {
        normal += src_[i];
      }
    }
    if (!normal.empty() && normal.back() == '\n') normal.pop_back();
    src_ = std::move(normal);
  }

  std::vector<Piece> pieces() {
    std::vector<Piece> out;
    bool strip_next = false;  // a "-" closed the last tag: the text after it loses its front space
    while (pos_ < src_.size()) {
      const size_t open = next_tag(pos_);
      std::string text = src_.substr(pos_, open - pos_);
      if (strip_next) text = unicode::python_strip(text, /*front=*/true, /*back=*/false);
      strip_next = false;
      if (open == src_.size()) {
        add_text(out, text);
        pos_ = open;
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char modifier = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (modifier == '-') {
        text = unicode::python_strip(text, /*front=*/false, /*back=*/true);
      } else if (kind != '{' && modifier != '+') {
        lstrip_block(text, pos_);
      }
      add_text(out, text);
      pos_ = open + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
      const int line = line_at(open);
      if (kind == '#') {
        const size_t close = src_.find("#}", pos_);
        if (close == std::string::npos) fail(line, "a comment is not closed");
        strip_next = close > pos_ && src_[close - 1] == '-';
        const bool keep_newline = close > pos_ && src_[close - 1] == '+';
        pos_ = close + 2;
        if (!strip_next && !keep_newline) trim_block_newline();
        continue;
      }
      Piece piece{kind == '{' ? Piece::kOutput : Piece::kStatement, "", {}, line};
      const std::string close = kind == '{' ? "}}" : "%}";
      strip_next = read_tokens(close, piece.tokens);
      if (kind == '%' && is_raw(piece)) {  // {% raw %} keeps the newline after it
        add_text(out, read_raw(line, strip_next, &strip_next));
        continue;
      }
      if (kind == '%' && !strip_next && !plus_before_close_) trim_block_newline();
      out.push_back(std::move(piece));
    }
    return out;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const { fail_at(where_, line, what); }
  int line_at(size_t at) const {
    return 1 + int(std::count(src_.begin(), src_.begin() + long(at), '\n'));
  }
  bool begins_line(size_t at) const { return at == 0 || src_[at - 1] == '\n'; }

  // lstrip_blocks: a block or comment tag alone after a line's indentation takes it. `text`
  // began at `text_start` in the source.
  void lstrip_block(std::string& text, size_t text_start) const {
    const size_t line_start = text.find_last_of('\n');
    const size_t from = line_start == std::string::npos ? 0 : line_start + 1;
    const bool at_line_start = line_start != std::string::npos || begins_line(text_start);
    if (at_line_start && unicode::python_strip(text.substr(from)).empty()) text.erase(from);
  }

  // The next "{{", "{%" or "{#" from `from` (the source's size if none).
  size_t next_tag(size_t from) const {
    for (size_t at = src_.find('{', from); at != std::string::npos; at = src_.find('{', at + 1))
      if (at + 1 < src_.size() &&
          (src_[at + 1] == '{' || src_[at + 1] == '%' || src_[at + 1] == '#'))
        return at;
    return src_.size();
  }

  static void add_text(std::vector<Piece>& out, const std::string& text) {
    if (!text.empty()) out.push_back({Piece::kText, text, {}, 0});
  }

  // trim_blocks: the first newline after a block or comment tag is dropped.
  void trim_block_newline() {
    if (pos_ < src_.size() && src_[pos_] == '\n') ++pos_;
  }

  static bool is_raw(const Piece& p) {
    return p.tokens.size() == 1 && p.tokens[0].type == Tok::kName && p.tokens[0].text == "raw";
  }

  // {% raw %}...{% endraw %}: the text between, untouched; *strip_after: its end tag's "-%}".
  std::string read_raw(int line, bool strip_front, bool* strip_after) {
    for (size_t at = src_.find("{%", pos_); at != std::string::npos; at = src_.find("{%", at + 2)) {
      size_t name = at + 2;
      if (name < src_.size() && (src_[name] == '-' || src_[name] == '+')) ++name;
      while (name < src_.size() && is_space(src_[name])) ++name;
      if (src_.compare(name, 6, "endraw") != 0) continue;
      std::string text = src_.substr(pos_, at - pos_);
      if (strip_front) text = unicode::python_strip(text, /*front=*/true, /*back=*/false);
      if (src_[at + 2] == '-') {
        text = unicode::python_strip(text, /*front=*/false, /*back=*/true);
      } else if (src_[at + 2] != '+') {
        lstrip_block(text, pos_);
      }
      pos_ = name + 6;
      std::vector<Token> rest;
      *strip_after = read_tokens("%}", rest);
      if (!*strip_after && !plus_before_close_) trim_block_newline();
      return text;
    }
    fail(line, "{% raw %} is not closed");
  }

  // The tokens up to `close` ("}}" or "%}"); true where a "-" precedes it.
  bool read_tokens(const std::string& close, std::vector<Token>& tokens) {
    plus_before_close_ = false;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      const int line = line_at(pos_);
      if (pos_ >= src_.size()) fail(line, "a tag is not closed (" + close + ")");
      for (const char* mod : {"-", "+", ""}) {
        const std::string end = mod + close;
        if (src_.compare(pos_, end.size(), end) == 0) {
          pos_ += end.size();
          plus_before_close_ = *mod == '+';
          return *mod == '-';
        }
      }
      const char c = src_[pos_];
      if (is_name_start(c)) {
        const size_t from = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        tokens.push_back({Tok::kName, src_.substr(from, pos_ - from), line});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        tokens.push_back(read_number(line));
      } else if (c == '\'' || c == '"') {
        tokens.push_back({Tok::kString, read_string(line), line});
      } else {
        static const char* ops[] = {"==", "!=", "<=", ">=", "//", "**", "+", "-", "*",
                                    "/",  "%",  "~",  "|",  ".",  ",",  ":", "(", ")",
                                    "[",  "]",  "{",  "}",  "=",  "<",  ">"};
        bool found = false;
        for (const char* op : ops) {
          const size_t n = std::char_traits<char>::length(op);
          if (src_.compare(pos_, n, op) == 0) {
            tokens.push_back({Tok::kOp, op, line});
            pos_ += n;
            found = true;
            break;
          }
        }
        if (!found) fail(line, std::string("unexpected character '") + c + "'");
      }
    }
  }

  Token read_number(int line) {
    std::string digits;
    bool is_float = false;
    auto take_digits = [&] {
      while (pos_ < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
        if (src_[pos_++] != '_') digits += src_[pos_ - 1];
    };
    take_digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      is_float = true;
      digits += src_[pos_++];
      take_digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      is_float = true;
      digits += src_[pos_++];
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) digits += src_[pos_++];
      take_digits();
    }
    return {is_float ? Tok::kFloat : Tok::kInt, digits, line};
  }

  // A string literal with Python's escapes (Jinja2 decodes them as "unicode-escape").
  std::string read_string(int line) {
    const char quote = src_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) fail(line, "a string is not closed");
      const char c = src_[pos_++];
      if (c == quote) return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) fail(line, "a string is not closed");
      const char e = src_[pos_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case 'a':
          out += '\a';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '\n':
          break;  // a line continuation
        case 'x':
          out += code_point(line, 2);
          break;
        case 'u':
          out += code_point(line, 4);
          break;
        case 'U':
          out += code_point(line, 8);
          break;
        default:
          if (e >= '0' && e <= '7') {
            int value = e - '0';
            for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7';
                 ++i)
              value = value * 8 + (src_[pos_++] - '0');
            unicode::append_utf8(char32_t(value), &out);
          } else if (e == 'N') {
            fail(line, "\\N{...} escapes are not supported");
          } else {
            out += '\\';  // Python keeps an unknown escape as written
            out += e;
          }
      }
    }
  }

  std::string code_point(int line, int hex_digits) {
    if (pos_ + size_t(hex_digits) > src_.size()) fail(line, "a truncated \\x, \\u or \\U escape");
    uint32_t value = 0;
    const auto [end, ec] =
        std::from_chars(src_.data() + pos_, src_.data() + pos_ + hex_digits, value, 16);
    if (ec != std::errc() || end != src_.data() + pos_ + hex_digits || value > 0x10FFFF)
      fail(line, "an invalid \\x, \\u or \\U escape");
    pos_ += size_t(hex_digits);
    std::string out;
    unicode::append_utf8(char32_t(value), &out);
    return out;
  }

  std::string src_, where_;
  size_t pos_ = 0;
  bool plus_before_close_ = false;
};

// ---------------------------------------------------------------------------------------------
// Values: JSON's, plus Undefined, namespace() objects and callables.

struct Value {
  enum Kind { kUndefined, kData, kNamespace, kCallable } kind = kUndefined;
  json data;                          // kData (null: None)
  std::shared_ptr<json> attributes;   // kNamespace: shared, so `set ns.x` reaches every copy
  std::string callable;               // kCallable: a global function or a method's name
  std::shared_ptr<const Value> self;  // a method's receiver
  std::string name;                   // kUndefined: what was looked up, for errors

  static Value of(json j) {
    Value v;
    v.kind = kData;
    v.data = std::move(j);
    return v;
  }
  static Value undefined(std::string name) {
    Value v;
    v.name = std::move(name);
    return v;
  }
  bool is_undefined() const { return kind == kUndefined; }
  bool is_none() const { return kind == kData && data.is_null(); }
  bool is_string() const { return kind == kData && data.is_string(); }
};

// ---------------------------------------------------------------------------------------------
// Expressions

struct Expr;
using ExprPtr = std::shared_ptr<Expr>;

struct Expr {
  enum Kind {
    kLiteral,
    kName,
    kList,
    kTuple,
    kDict,
    kAttr,
    kItem,
    kSlice,
    kCall,
    kFilter,
    kTest,
    kNot,
    kNegate,
    kBinary,
    kCompare,
    kAnd,
    kOr,
    kCondition
  } kind;
  int line = 0;
  json literal;
  std::string name;           // name, attribute, filter, test, binary operator
  std::vector<ExprPtr> args;  // operands, elements, positional arguments
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare: the operators between args
  bool negated = false;          // kTest: "is not"
  int depth = 1;                 // of the tree under it, which evaluation recurses down
};

ExprPtr make(Expr::Kind kind, int line) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// ---------------------------------------------------------------------------------------------
// Statements

struct Node;
using Body = std::vector<std::shared_ptr<Node>>;

struct Node {
  enum Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kBreak, kContinue, kGeneration } kind;
  int line = 0;
  std::string text;                                // kText
  ExprPtr expr;                                    // kOutput, kFor's iterable, kSet's value
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: conditions and bodies
  Body body, else_body;                            // kFor, kSetBlock, kGeneration; else
  std::vector<std::string> targets;                // kFor's loop variables; kSet's names
  std::string attribute;                           // kSet on a namespace: ns.attribute
  ExprPtr filter;                                  // kFor: {% for x in y if filter %}
};

// Nesting deeper than this (brackets, blocks) is refused rather than recursed into.
constexpr int kMaxDepth = 256;
// What a template may build before it is refused rather than run out of memory or time: a
// text or list of kMaxSize bytes or items (32 MiB: a prompt is far shorter), a range of kMaxRange
// items (Jinja2's sandbox: MAX_RANGE), kMaxSteps statements run.
constexpr double kMaxSize = 1 << 25;
constexpr double kMaxRange = 100000;
constexpr int64_t kMaxSteps = 300'000;

class Parser {
 public:
  Parser(std::vector<Piece> pieces, std::string where)
      : pieces_(std::move(pieces)), where_(std::move(where)) {}

  Body parse() {
    std::string end;
    Body body = parse_body({}, &end);
    return body;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const { fail_at(where_, line, what); }

  // Nodes up to a statement named in `ends` (its name in *end, its piece consumed); at the
  // source's end when `ends` is empty.
  Body parse_body(const std::vector<std::string>& ends, std::string* end) {
    const Deeper deeper(*this);
    Body body;
    while (at_ < pieces_.size()) {
      const Piece& p = pieces_[at_];
      if (p.kind == Piece::kText) {
        auto n = std::make_shared<Node>();
        n->kind = Node::kText;
        n->text = p.text;
        body.push_back(n);
        ++at_;
        continue;
      }
      toks_ = &p.tokens;
      tok_ = 0;
      line_ = p.line;
      if (p.kind == Piece::kOutput) {
        auto n = std::make_shared<Node>();
        n->kind = Node::kOutput;
        n->line = line_;
        n->expr = expression();
        expect_end();
        body.push_back(n);
        ++at_;
        continue;
      }
      if (toks_->empty() || toks_->front().type != Tok::kName)
        fail(line_, "a statement without a name");
      const std::string name = toks_->front().text;
      if (std::find(ends.begin(), ends.end(), name) != ends.end()) {
        *end = name;
        tok_ = 1;
        return body;  // the caller reads the rest of this piece, then moves on
      }
      tok_ = 1;
      ++at_;
      body.push_back(statement(name));
    }
    if (!ends.empty()) fail(line_, "expected {% " + ends.back() + " %} before the template's end");
    return body;
  }

  std::shared_ptr<Node> statement(const std::string& name) {
    auto n = std::make_shared<Node>();
    n->line = line_;
    const int line = line_;
    std::string end;
    if (name == "if") {
      n->kind = Node::kIf;
      ExprPtr condition = expression();
      expect_end();
      while (true) {
        Body body = parse_body({"elif", "else", "endif"}, &end);
        n->branches.push_back({condition, body});
        if (end == "elif") {
          condition = expression();
          close_tag();
          continue;
        }
        close_tag();
        if (end == "else") {
          n->else_body = parse_body({"endif"}, &end);
          close_tag();
        }
        break;
      }
    } else if (name == "for") {
      n->kind = Node::kFor;
      do {
        n->targets.push_back(expect_name());
      } while (skip_op(","));
      if (!skip_name("in")) fail(line, "expected 'in' in a for loop");
      n->expr = expression(/*with_condition=*/false);
      if (skip_name("if")) n->filter = expression(false);
      if (skip_name("recursive")) fail(line, "recursive loops are not supported");
      expect_end();
      n->body = parse_body({"else", "endfor"}, &end);
      close_tag();
      if (end == "else") {
        n->else_body = parse_body({"endfor"}, &end);
        close_tag();
      }
    } else if (name == "set") {
      n->targets.push_back(expect_name());
      if (skip_op(".")) {
        n->attribute = expect_name();
      } else {
        while (skip_op(",")) n->targets.push_back(expect_name());
      }
      if (skip_op("=")) {
        n->kind = Node::kSet;
        n->expr = tuple_or_expression();
        expect_end();
      } else {
        if (n->targets.size() != 1 || !n->attribute.empty()) fail(line, "expected '=' in set");
        if (peek_op("|")) fail(line, "filtered set blocks are not supported");
        n->kind = Node::kSetBlock;
        expect_end();
        n->body = parse_body({"endset"}, &end);
        close_tag();
      }
    } else if (name == "break" || name == "continue") {
      n->kind = name == "break" ? Node::kBreak : Node::kContinue;
      expect_end();
    } else if (name == "generation") {
      n->kind = Node::kGeneration;
      expect_end();
      n->body = parse_body({"endgeneration"}, &end);
      close_tag();
    } else {
      fail(line, "{% " + name +
                     " %} is not supported (kvbench renders chat templates with "
                     "if, for, set, break, continue, raw and generation)");
    }
    return n;
  }

  // --- tokens of the current piece
  const Token* peek() const { return tok_ < toks_->size() ? &(*toks_)[tok_] : nullptr; }
  bool peek_op(const char* op) const {
    const Token* t = peek();
    return t && t->type == Tok::kOp && t->text == op;
  }
  bool peek_name(const char* name) const {
    const Token* t = peek();
    return t && t->type == Tok::kName && t->text == name;
  }
  bool skip_op(const char* op) {
    if (!peek_op(op)) return false;
    ++tok_;
    return true;
  }
  bool skip_name(const char* name) {
    if (!peek_name(name)) return false;
    ++tok_;
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(line_, std::string("expected '") + op + "'" + found());
  }
  std::string expect_name() {
    const Token* t = peek();
    if (!t || t->type != Tok::kName) fail(line_, "expected a name" + found());
    ++tok_;
    return t->text;
  }
  void expect_end() {
    if (peek()) fail(line_, "unexpected '" + peek()->text + "'");
  }
  // The end tag parse_body stopped at, read whole, and the pieces after it next.
  void close_tag() {
    expect_end();
    ++at_;
  }
  std::string found() const {
    return peek() ? ", found '" + peek()->text + "'" : ", found the tag's end";
  }

  // --- expressions, in Jinja2's precedence (parser.py): condition, or, and, not, compare,
  // + -, ~, * / // %, **, unary, then postfix and filters/tests, which bind tightest.
  ExprPtr tuple_or_expression() {
    ExprPtr first = expression();
    if (!peek_op(",")) return first;
    ExprPtr tuple = make(Expr::kTuple, line_);
    tuple->args.push_back(first);
    while (skip_op(",") && peek()) tuple->args.push_back(expression());
    return tuple;
  }

  ExprPtr expression(bool with_condition = true) {
    const Deeper deeper(*this);
    ExprPtr e = or_expr();
    while (with_condition && skip_name("if")) {
      ExprPtr c = make(Expr::kCondition, line_);
      c->args = {or_expr(), e, nullptr};
      if (skip_name("else")) c->args[2] = expression();
      e = measured(c);
    }
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (skip_name("or")) e = binary(Expr::kOr, "or", e, and_expr());
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (skip_name("and")) e = binary(Expr::kAnd, "and", e, not_expr());
    return e;
  }
  ExprPtr not_expr() {
    const Deeper deeper(*this);
    if (peek_name("not")) {
      ++tok_;
      ExprPtr n = make(Expr::kNot, line_);
      n->args = {not_expr()};
      return n;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr first = math1();
    ExprPtr c = make(Expr::kCompare, line_);
    c->args = {first};
    while (true) {
      const Token* t = peek();
      if (!t) break;
      if (t->type == Tok::kOp && (t->text == "==" || t->text == "!=" || t->text == "<" ||
                                  t->text == ">" || t->text == "<=" || t->text == ">=")) {
        ++tok_;
        c->ops.push_back(t->text);
      } else if (t->type == Tok::kName && t->text == "in") {
        ++tok_;
        c->ops.push_back("in");
      } else if (t->type == Tok::kName && t->text == "not" && tok_ + 1 < toks_->size() &&
                 (*toks_)[tok_ + 1].text == "in") {
        tok_ += 2;
        c->ops.push_back("not in");
      } else {
        break;
      }
      c->args.push_back(math1());
    }
    return c->ops.empty() ? first : measured(c);
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (peek_op("+") || peek_op("-")) {
      const std::string op = peek()->text;
      ++tok_;
      e = binary(Expr::kBinary, op, e, concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (skip_op("~")) e = binary(Expr::kBinary, "~", e, math2());
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = power();
    while (peek_op("*") || peek_op("/") || peek_op("//") || peek_op("%")) {
      const std::string op = peek()->text;
      ++tok_;
      e = binary(Expr::kBinary, op, e, power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary(true);
    while (skip_op("**")) e = binary(Expr::kBinary, "**", e, unary(true));
    return e;
  }
  ExprPtr unary(bool with_filter) {
    const Deeper deeper(*this);
    ExprPtr e;
    if (skip_op("-")) {
      e = make(Expr::kNegate, line_);
      e->args = {unary(false)};
    } else if (skip_op("+")) {
      e = unary(false);
    } else {
      e = postfix(primary());
    }
    return with_filter ? filters(e) : e;
  }
  ExprPtr binary(Expr::Kind kind, const std::string& op, ExprPtr a, ExprPtr b) {
    ExprPtr e = make(kind, line_);
    e->name = op;
    e->args = {std::move(a), std::move(b)};
    return measured(e);
  }
  // A chain (a + b + ..., x|f|g..., a.b.c...) grows a tree as deep as it is long, without
  // recursing here: its depth is bounded too.
  ExprPtr measured(ExprPtr e) {
    for (const ExprPtr& a : e->args)
      if (a) e->depth = std::max(e->depth, a->depth + 1);
    if (e->depth > 4 * kMaxDepth) fail(line_, "an expression nested too deeply");
    return e;
  }

  ExprPtr primary() {
    const Token* t = peek();
    if (!t) fail(line_, "expected an expression, found the tag's end");
    ++tok_;
    if (t->type == Tok::kName) {
      if (t->text == "true" || t->text == "True") return literal(true);
      if (t->text == "false" || t->text == "False") return literal(false);
      if (t->text == "none" || t->text == "None") return literal(nullptr);
      ExprPtr e = make(Expr::kName, line_);
      e->name = t->text;
      return e;
    }
    if (t->type == Tok::kString) {
      std::string text = t->text;
      while (peek() && peek()->type == Tok::kString) text += (*toks_)[tok_++].text;  // "a" "b"
      return literal(text);
    }
    if (t->type == Tok::kInt) return literal(json(integer(t->text)));
    if (t->type == Tok::kFloat) {
      const double d = std::strtod(t->text.c_str(), nullptr);
      if (!std::isfinite(d)) fail(line_, t->text + ": too large a number");
      return literal(json(d));
    }
    if (t->text == "(") {
      if (skip_op(")")) return make(Expr::kTuple, line_);
      ExprPtr first = expression();
      if (skip_op(")")) return first;
      ExprPtr tuple = make(Expr::kTuple, line_);
      tuple->args.push_back(first);
      while (skip_op(",") && !peek_op(")")) tuple->args.push_back(expression());
      expect_op(")");
      return tuple;
    }
    if (t->text == "[") {
      ExprPtr list = make(Expr::kList, line_);
      while (!skip_op("]")) {
        list->args.push_back(expression());
        if (!skip_op(",")) {
          expect_op("]");
          break;
        }
      }
      return list;
    }
    if (t->text == "{") {
      ExprPtr dict = make(Expr::kDict, line_);
      while (!skip_op("}")) {
        dict->args.push_back(expression());
        expect_op(":");
        dict->args.push_back(expression());
        if (!skip_op(",")) {
          expect_op("}");
          break;
        }
      }
      return dict;
    }
    fail(line_, "unexpected '" + t->text + "'");
  }
  int64_t integer(const std::string& digits) const {
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || end != digits.data() + digits.size())
      fail(line_, digits + ": kvbench's integers are 64-bit");
    return value;
  }
  ExprPtr literal(json value) {
    ExprPtr e = make(Expr::kLiteral, line_);
    e->literal = std::move(value);
    return e;
  }

  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (skip_op(".")) {
        const Token* t = peek();
        if (!t || (t->type != Tok::kName && t->type != Tok::kInt))
          fail(line_, "expected an attribute after '.'" + found());
        ++tok_;
        ExprPtr a = make(t->type == Tok::kName ? Expr::kAttr : Expr::kItem, line_);
        a->args = {e};
        if (t->type == Tok::kName) {
          a->name = t->text;
        } else {
          a->args.push_back(literal(json(integer(t->text))));
        }
        e = measured(a);
      } else if (skip_op("[")) {
        e = measured(subscript(e));
      } else if (peek_op("(")) {
        e = measured(call(e));
      } else {
        return e;
      }
    }
  }
  ExprPtr subscript(ExprPtr object) {
    std::vector<ExprPtr> parts(1);  // [a], or [a:b:c] (an empty part: nullptr)
    bool slice = false;
    if (!peek_op(":")) parts[0] = expression();
    while (skip_op(":")) {
      slice = true;
      parts.push_back(peek_op(":") || peek_op("]") ? nullptr : expression());
    }
    expect_op("]");
    if (parts.size() > 3) fail(line_, "a slice takes at most three parts");
    ExprPtr e = make(slice ? Expr::kSlice : Expr::kItem, line_);
    parts.resize(slice ? 3 : 1);
    e->args = {object};
    e->args.insert(e->args.end(), parts.begin(), parts.end());
    return e;
  }
  // Arguments in parentheses into e's args (after those it has) and kwargs.
  void arguments(Expr& e) {
    expect_op("(");
    while (!skip_op(")")) {
      if (peek_op("*") || peek_op("**")) fail(line_, "*args and **kwargs are not supported");
      const Token* t = peek();
      if (t && t->type == Tok::kName && tok_ + 1 < toks_->size() &&
          (*toks_)[tok_ + 1].type == Tok::kOp && (*toks_)[tok_ + 1].text == "=") {
        tok_ += 2;
        e.kwargs.push_back({t->text, expression()});
      } else {
        if (!e.kwargs.empty()) fail(line_, "a positional argument after a keyword argument");
        e.args.push_back(expression());
      }
      if (!skip_op(",")) {
        expect_op(")");
        break;
      }
    }
  }
  ExprPtr call(ExprPtr callee) {
    ExprPtr e = make(Expr::kCall, line_);
    e->args = {callee};
    arguments(*e);
    return e;
  }
  ExprPtr filters(ExprPtr e) {
    while (true) {
      if (skip_op("|")) {
        ExprPtr f = make(Expr::kFilter, line_);
        f->name = expect_name();
        f->args = {e};
        if (peek_op("(")) arguments(*f);
        e = measured(f);
      } else if (skip_name("is")) {
        ExprPtr t = make(Expr::kTest, line_);
        t->negated = skip_name("not");
        t->name = expect_name();
        t->args = {e};
        const Token* next = peek();
        if (peek_op("(")) {
          arguments(*t);
        } else if (next && (next->type == Tok::kString || next->type == Tok::kInt ||
                            next->type == Tok::kFloat || peek_op("[") || peek_op("{") ||
                            (next->type == Tok::kName && next->text != "else" &&
                             next->text != "or" && next->text != "and" && next->text != "if"))) {
          t->args.push_back(postfix(primary()));  // `is divisibleby 3`, `is equalto "x"`
        }
        e = measured(t);
      } else if (peek_op("(")) {
        e = measured(call(e));
      } else {
        return e;
      }
    }
  }

  // Counts the parser's recursion while in scope.
  struct Deeper {
    explicit Deeper(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxDepth) parser.fail(parser.line_, "nested too deeply");
    }
    ~Deeper() { --parser.depth_; }
    Parser& parser;
  };

  std::vector<Piece> pieces_;
  std::string where_;
  int depth_ = 0;
  size_t at_ = 0;
  const std::vector<Token>* toks_ = nullptr;
  size_t tok_ = 0;
  int line_ = 1;
};

// ---------------------------------------------------------------------------------------------
// Python's str(), repr() and json.dumps of the values

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Python's repr: the shortest round trip, positional from 1e-4 to below 1e16 (".0" on an
  // integer), else in exponent form with at least two exponent digits, as to_chars writes it.
  char buffer[400];
  const bool positional = d == 0 || (std::abs(d) >= 1e-4 && std::abs(d) < 1e16);
  const auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof buffer, d,
                    positional ? std::chars_format::fixed : std::chars_format::scientific);
  std::string s(buffer, end);
  if (positional && s.find('.') == std::string::npos) s += ".0";
  return s;
}

std::string python_repr(const json& j);

// Thrown where a value's repr is out of reach; the renderer names the line.
struct UnsupportedRepr : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string hex_code(char32_t c) {
  char hex[12];
  std::snprintf(hex, sizeof hex, "%04X", unsigned(c));
  return hex;
}

// Python's repr of a str: quotes it does not contain, escapes for the quote, the backslash and
// what it does not print (controls, and spaces other than ' ').
std::string string_repr(const std::string& s) {
  const char quote =
      s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (size_t at = 0; at < s.size();) {
    char32_t c;
    const size_t n = unicode::decode_utf8(s, at, &c);
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n' || c == '\t' || c == '\r') {
      out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\r";
    } else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad ||
               (c != ' ' && unicode::is_python_space(c))) {
      char hex[12];
      std::snprintf(hex, sizeof hex, c < 0x100 ? "\\x%02x" : "\\u%04x", unsigned(c));
      out += hex;
    } else if (c < 0x80 || unicode::is_letter(c) || unicode::is_number(c)) {
      out += s.substr(at, n);
    } else {
      // Python escapes what it does not print (format, private-use, unassigned characters...),
      // which kvbench has no table of.
      throw UnsupportedRepr("repr of a text holding U+" + hex_code(c) + " is not supported");
    }
    at += n;
  }
  return out + quote;
}

std::string python_repr(const json& j) {
  if (j.is_null()) return "None";
  if (j.is_boolean()) return j.get<bool>() ? "True" : "False";
  if (j.is_number_float()) return float_repr(j.get<double>());
  if (j.is_number()) return j.dump();
  if (j.is_string()) return string_repr(j.get<std::string>());
  std::string out = j.is_array() ? "[" : "{";
  bool first = true;
  if (j.is_array()) {
    for (const json& e : j) out += (first ? "" : ", ") + python_repr(e), first = false;
  } else {
    for (const auto& [k, v] : j.items())
      out += (first ? "" : ", ") + string_repr(k) + ": " + python_repr(v), first = false;
  }
  return out + (j.is_array() ? "]" : "}");
}

std::string python_str(const Value& v) {
  if (v.is_undefined()) return "";
  if (v.kind == Value::kNamespace) return "<Namespace " + python_repr(*v.attributes) + ">";
  if (v.kind == Value::kCallable) throw UnsupportedRepr("printing a function is not supported");
  if (v.data.is_string()) return v.data.get<std::string>();
  return python_repr(v.data);
}

// Python's json.dumps (ensure_ascii=False, as transformers' tojson): ", " and ": " without an
// indent; with one, a line per item and "," after it.
void python_json(const json& j, int indent, int depth, std::string& out) {
  auto newline = [&](int d) {
    if (indent >= 0) out += "\n" + std::string(size_t(indent * d), ' ');
  };
  const std::string item_sep = indent >= 0 ? "," : ", ";
  if (j.is_array() || j.is_object()) {
    if (j.empty()) {
      out += j.is_array() ? "[]" : "{}";
      return;
    }
    out += j.is_array() ? "[" : "{";
    bool first = true;
    auto next_item = [&] {
      if (!first) out += item_sep;
      first = false;
      newline(depth + 1);
    };
    if (j.is_array()) {
      for (const json& e : j) {
        next_item();
        python_json(e, indent, depth + 1, out);
      }
    } else {
      for (const auto& [k, v] : j.items()) {
        next_item();
        out += json(k).dump(-1, ' ', false, json::error_handler_t::replace) + ": ";
        python_json(v, indent, depth + 1, out);
      }
    }
    newline(depth);
    out += j.is_array() ? "]" : "}";
    return;
  }
  if (j.is_number_float()) {
    const double d = j.get<double>();
    out += std::isnan(d)   ? "NaN"
           : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                           : float_repr(d);
    return;
  }
  if (j.is_boolean()) {
    out += j.get<bool>() ? "true" : "false";
    return;
  }
  out += j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// ---------------------------------------------------------------------------------------------
// Rendering

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const json& variables, std::string where) : where_(std::move(where)) {
    frames_.emplace_back();
    for (const auto& [k, v] : variables.items()) frames_.back()[k] = Value::of(v);
  }

  void render(const Body& body, std::string& out) {
    try {
      if (run(body, out) != Flow::kNormal) fail(line_, "break or continue outside a loop");
    } catch (const UnsupportedRepr& e) {
      fail(line_, e.what());
    }
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const { fail_at(where_, line, what); }

  std::string sized(std::string text, int line) const {
    if (double(text.size()) > kMaxSize) fail(line, "too long a text");
    return text;
  }

  Flow run(const Body& body, std::string& out) {
    for (const auto& n : body) {
      line_ = n->line;
      if (++steps_ > kMaxSteps) fail(n->line, "the template runs too long");
      if (double(out.size()) > kMaxSize) fail(n->line, "too long a text");
      switch (n->kind) {
        case Node::kText:
          out += n->text;
          break;
        case Node::kOutput:
          out += python_str(eval(*n->expr));
          break;
        case Node::kIf: {
          bool taken = false;
          for (const auto& [condition, branch] : n->branches) {
            if (truthy(eval(*condition))) {
              taken = true;
              if (Flow f = run(branch, out); f != Flow::kNormal) return f;
              break;
            }
          }
          if (!taken)
            if (Flow f = run(n->else_body, out); f != Flow::kNormal) return f;
          break;
        }
        case Node::kFor:
          run_for(*n, out);
          break;
        case Node::kSet:
          assign(*n, eval(*n->expr));
          break;
        case Node::kSetBlock: {
          std::string captured;
          {
            const Frame frame(*this);
            if (run(n->body, captured) != Flow::kNormal)
              fail(n->line, "break or continue in a set block");
          }
          assign(*n, Value::of(captured));
          break;
        }
        case Node::kBreak:
          return Flow::kBreak;
        case Node::kContinue:
          return Flow::kContinue;
        case Node::kGeneration:
          if (Flow f = run(n->body, out); f != Flow::kNormal) return f;
          break;
      }
    }
    return Flow::kNormal;
  }

  void assign(const Node& n, const Value& value) {
    if (!n.attribute.empty()) {
      const Value target = lookup(n.targets[0]);
      if (target.kind != Value::kNamespace)
        fail(n.line, "set " + n.targets[0] + "." + n.attribute + ": " + n.targets[0] +
                         " is no namespace()");
      (*target.attributes)[n.attribute] = to_json(value, n.line);
      return;
    }
    if (n.targets.size() == 1) {
      frames_.back()[n.targets[0]] = value;
      return;
    }
    const std::vector<Value> items = iterate(value, n.line);
    if (items.size() != n.targets.size())
      fail(n.line, "set: " + std::to_string(n.targets.size()) + " names for " +
                       std::to_string(items.size()) + " values");
    for (size_t i = 0; i < items.size(); ++i) frames_.back()[n.targets[i]] = items[i];
  }

  // Jinja2's scopes: each iteration of a loop, its else and a set block's body are a frame
  // of their own; what they set is gone after them (namespace() objects outlive them).
  struct Frame {
    explicit Frame(Renderer& r) : renderer(r) { renderer.frames_.emplace_back(); }
    ~Frame() { renderer.frames_.pop_back(); }
    Renderer& renderer;
  };

  void run_for(const Node& n, std::string& out) {
    std::vector<Value> items = iterate(eval(*n.expr), n.line);
    auto bind = [&](const Value& item) {
      if (n.targets.size() == 1) {
        frames_.back()[n.targets[0]] = item;
        return;
      }
      const std::vector<Value> parts = iterate(item, n.line);
      if (parts.size() != n.targets.size())
        fail(n.line,
             "for: cannot unpack an item into " + std::to_string(n.targets.size()) + " names");
      for (size_t i = 0; i < parts.size(); ++i) frames_.back()[n.targets[i]] = parts[i];
    };
    if (n.filter) {  // the loop counts only the items the filter keeps
      std::vector<Value> kept;
      for (const Value& item : items) {
        if (++steps_ > kMaxSteps) fail(n.line, "the template runs too long");
        const Frame frame(*this);
        bind(item);
        if (truthy(eval(*n.filter))) kept.push_back(item);
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (++steps_ > kMaxSteps) fail(n.line, "the template runs too long");
      const Frame frame(*this);
      bind(items[i]);
      const int64_t length = int64_t(items.size()), index = int64_t(i);
      json loop = {{"index0", index},
                   {"index", index + 1},
                   {"revindex0", length - index - 1},
                   {"revindex", length - index},
                   {"first", i == 0},
                   {"last", i + 1 == items.size()},
                   {"length", length},
                   {"depth", 1},
                   {"depth0", 0}};
      if (i > 0) loop["previtem"] = to_json(items[i - 1], n.line);
      if (i + 1 < items.size()) loop["nextitem"] = to_json(items[i + 1], n.line);
      frames_.back()["loop"] = Value::of(std::move(loop));
      if (run(n.body, out) == Flow::kBreak) break;
    }
    if (items.empty()) {
      const Frame frame(*this);
      if (run(n.else_body, out) != Flow::kNormal) fail(n.line, "break or continue outside a loop");
    }
  }

  Value lookup(const std::string& name) const {
    for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame)
      if (const auto found = frame->find(name); found != frame->end()) return found->second;
    if (name == "raise_exception" || name == "namespace" || name == "range") {
      Value v;
      v.kind = Value::kCallable;
      v.callable = name;
      return v;
    }
    return Value::undefined(name);
  }

  static bool truthy(const Value& v) {
    if (v.kind != Value::kData) return v.kind != Value::kUndefined;
    const json& j = v.data;
    if (j.is_null()) return false;
    if (j.is_boolean()) return j.get<bool>();
    if (j.is_number_integer()) return j.get<int64_t>() != 0;
    if (j.is_number()) return j.get<double>() != 0.0;
    if (j.is_string()) return !j.get<std::string>().empty();
    return !j.empty();
  }

  json to_json(const Value& v, int line) const {
    if (v.kind == Value::kData) return v.data;
    if (v.is_undefined()) fail(line, "'" + v.name + "' is undefined");
    fail(line, "a namespace or function cannot be stored or compared here");
  }

  std::string undefined_message(const Value& v) const { return "'" + v.name + "' is undefined"; }

  // Python iteration: a list's items, a dict's keys, a string's characters; Undefined: none.
  std::vector<Value> iterate(const Value& v, int line) const {
    std::vector<Value> out;
    if (v.is_undefined()) return out;
    if (v.kind != Value::kData) fail(line, "cannot iterate over a namespace or function");
    const json& j = v.data;
    if (j.is_array()) {
      for (const json& e : j) out.push_back(Value::of(e));
    } else if (j.is_object()) {
      for (const auto& [k, e] : j.items()) out.push_back(Value::of(k));
    } else if (j.is_string()) {
      for (const char32_t c : unicode::to_code_points(j.get<std::string>()))
        out.push_back(Value::of(unicode::to_utf8(std::u32string(1, c))));
    } else {
      fail(line, python_repr(j) + " is not iterable");
    }
    return out;
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::kLiteral:
        return Value::of(e.literal);
      case Expr::kName:
        return lookup(e.name);
      case Expr::kList:
      case Expr::kTuple: {
        json list = json::array();
        for (const auto& a : e.args) list.push_back(to_json(eval(*a), e.line));
        return Value::of(list);
      }
      case Expr::kDict: {
        json dict = json::object();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value key = eval(*e.args[i]);
          if (!key.is_string()) fail(e.line, "kvbench's dicts take string keys only");
          dict[key.data.get<std::string>()] = to_json(eval(*e.args[i + 1]), e.line);
        }
        return Value::of(dict);
      }
      case Expr::kAttr:
        return attribute(eval(*e.args[0]), e.name, e.line);
      case Expr::kItem:
        return item_of(eval(*e.args[0]), eval(*e.args[1]), e.line);
      case Expr::kSlice:
        return slice(e);
      case Expr::kCall:
        return call(e);
      case Expr::kFilter:
        return filter(e);
      case Expr::kTest:
        return Value::of(test(e) != e.negated);
      case Expr::kNot:
        return Value::of(!truthy(eval(*e.args[0])));
      case Expr::kNegate: {
        const Value v = eval(*e.args[0]);
        if (v.kind == Value::kData && v.data.is_number_integer()) {
          if (v.data.get<int64_t>() == INT64_MIN) fail(e.line, "an integer beyond 64 bits");
          return Value::of(-v.data.get<int64_t>());
        }
        if (v.kind == Value::kData && v.data.is_number()) return Value::of(-v.data.get<double>());
        fail(e.line, "bad operand for unary -");
      }
      case Expr::kAnd: {
        const Value a = eval(*e.args[0]);
        return truthy(a) ? eval(*e.args[1]) : a;
      }
      case Expr::kOr: {
        const Value a = eval(*e.args[0]);
        return truthy(a) ? a : eval(*e.args[1]);
      }
      case Expr::kCondition:
        if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined("the condition's else");
      case Expr::kBinary:
        return binary(e.name, eval(*e.args[0]), eval(*e.args[1]), e.line);
      case Expr::kCompare: {
        Value left = eval(*e.args[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {  // Python's chain: a < b < c
          Value right = eval(*e.args[i + 1]);
          if (!compare(e.ops[i], left, right, e.line)) return Value::of(false);
          left = std::move(right);
        }
        return Value::of(true);
      }
    }
    fail(e.line, "unknown expression");
  }

  // --- operators
  static bool is_number(const Value& v) { return v.kind == Value::kData && v.data.is_number(); }
  static double number(const Value& v) { return v.data.get<double>(); }
  static bool both_int(const Value& a, const Value& b) {
    return a.data.is_number_integer() && b.data.is_number_integer();
  }

  Value binary(const std::string& op, const Value& a, const Value& b, int line) {
    if (op == "~") return Value::of(sized(python_str(a) + python_str(b), line));
    if (a.is_undefined() || b.is_undefined())
      fail(line, undefined_message(a.is_undefined() ? a : b));
    if (op == "+") {
      if (a.is_string() && b.is_string())
        return Value::of(sized(a.data.get<std::string>() + b.data.get<std::string>(), line));
      if (a.kind == Value::kData && b.kind == Value::kData && a.data.is_array() &&
          b.data.is_array()) {
        if (double(a.data.size()) + double(b.data.size()) > kMaxSize) fail(line, "too long a list");
        json joined = a.data;
        for (const json& x : b.data) joined.push_back(x);
        return Value::of(joined);
      }
    }
    if (op == "*" && a.is_string() && b.kind == Value::kData && b.data.is_number_integer()) {
      if (b.data.get<int64_t>() > 0 &&
          double(b.data.get<int64_t>()) * double(a.data.get<std::string>().size()) > kMaxSize)
        fail(line, "a string repeated into too long a text");
      std::string out;
      for (int64_t i = 0; i < b.data.get<int64_t>(); ++i) out += a.data.get<std::string>();
      return Value::of(out);
    }
    if (!is_number(a) || !is_number(b) || a.data.is_boolean() || b.data.is_boolean())
      fail(line, "unsupported operands for " + op + ": " + python_repr(to_json(a, line)) + " and " +
                     python_repr(to_json(b, line)));
    if (both_int(a, b) && op != "/") {
      const int64_t x = a.data.get<int64_t>(), y = b.data.get<int64_t>();
      if ((op == "//" || op == "%") && y == 0) fail(line, "division by zero");
      int64_t r = 1;
      bool overflow = false;
      if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
      if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
      if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
      if (op == "**" && y >= 0) {  // by squaring
        int64_t base = x;
        for (int64_t e = y; e > 0 && !overflow; e >>= 1) {
          if (e & 1) overflow = __builtin_mul_overflow(r, base, &r);
          if (e > 1) overflow = overflow || __builtin_mul_overflow(base, base, &base);
        }
      }
      if (overflow) fail(line, "an integer beyond 64 bits");
      if (op == "+" || op == "-" || op == "*" || (op == "**" && y >= 0)) return Value::of(r);
      if (x == INT64_MIN && y == -1) fail(line, "an integer beyond 64 bits");
      if (op == "//") return Value::of(x / y - ((x % y != 0) && ((x < 0) != (y < 0))));
      if (op == "%") {  // Python's: the sign of the divisor
        const int64_t r = x % y;
        return Value::of(r != 0 && ((r < 0) != (y < 0)) ? r + y : r);
      }
    }
    const double x = number(a), y = number(b);
    if ((op == "/" || op == "//" || op == "%") && y == 0) fail(line, "division by zero");
    if (op == "+") return Value::of(x + y);
    if (op == "-") return Value::of(x - y);
    if (op == "*") return Value::of(x * y);
    if (op == "/") return Value::of(x / y);
    if (op == "//") return Value::of(std::floor(x / y));
    if (op == "%") return Value::of(x - y * std::floor(x / y));
    return Value::of(std::pow(x, y));
  }

  bool equal(const Value& a, const Value& b) const {
    if (a.kind != Value::kData || b.kind != Value::kData)
      return a.kind == b.kind && (a.kind == Value::kUndefined || a.attributes == b.attributes);
    // Python's numbers compare by value, True and False as 1 and 0.
    auto numeric = [](const json& j) { return j.is_number() || j.is_boolean(); };
    auto value = [](const json& j) {
      return j.is_boolean() ? double(j.get<bool>()) : j.get<double>();
    };
    if (numeric(a.data) && numeric(b.data)) {
      if (a.data.is_number_integer() && b.data.is_number_integer())
        return a.data.get<int64_t>() == b.data.get<int64_t>();
      return value(a.data) == value(b.data);
    }
    return a.data == b.data;
  }

  bool contains(const Value& container, const Value& x, int line) const {
    if (container.is_undefined()) return false;
    if (container.kind != Value::kData) fail(line, "'in' on a namespace or function");
    const json& c = container.data;
    if (c.is_string()) {
      if (!x.is_string()) fail(line, "'in <string>' requires a string on the left");
      return c.get<std::string>().find(x.data.get<std::string>()) != std::string::npos;
    }
    if (c.is_object()) return x.is_string() && c.contains(x.data.get<std::string>());
    if (c.is_array()) {
      for (const json& e : c)
        if (equal(Value::of(e), x)) return true;
      return false;
    }
    fail(line, "argument of type " + python_repr(c) + " is not iterable");
  }

  bool compare(const std::string& op, const Value& a, const Value& b, int line) const {
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (op == "in") return contains(b, a, line);
    if (op == "not in") return !contains(b, a, line);
    int order;
    if (is_number(a) && is_number(b)) {
      order = number(a) < number(b) ? -1 : number(a) > number(b) ? 1 : 0;
    } else if (a.is_string() && b.is_string()) {
      const int c = a.data.get<std::string>().compare(b.data.get<std::string>());
      order = c < 0 ? -1 : c > 0 ? 1 : 0;
    } else {
      fail(line, "'" + op + "' between values that do not order");
    }
    if (op == "<") return order < 0;
    if (op == ">") return order > 0;
    if (op == "<=") return order <= 0;
    return order >= 0;
  }

  // --- attributes and items: Jinja2's getattr (the Python attribute, then the item) and
  // getitem (the item, then the attribute); a missing one is Undefined.
  Value attribute(const Value& object, const std::string& name, int line) const {
    if (object.is_undefined()) fail(line, undefined_message(object) + " (reading ." + name + ")");
    if (object.kind == Value::kNamespace) {
      if (object.attributes->contains(name)) return Value::of((*object.attributes)[name]);
      return Value::undefined(name);
    }
    if (object.kind == Value::kData) {
      if (Value m = method(object, name); m.kind == Value::kCallable) return m;
      if (object.data.is_object() && object.data.contains(name))
        return Value::of(object.data[name]);
    }
    return Value::undefined(name);
  }

  // The str and dict methods kvbench calls, with the positional arguments each takes here.
  struct MethodInfo {
    bool on_string;  // else on a dict
    size_t least, most;
  };
  static const std::map<std::string, MethodInfo>& methods() {
    static const std::map<std::string, MethodInfo> table = {
        {"strip", {true, 0, 1}},    {"lstrip", {true, 0, 1}},   {"rstrip", {true, 0, 1}},
        {"startswith", {true, 1, 1}}, {"endswith", {true, 1, 1}}, {"upper", {true, 0, 0}},
        {"lower", {true, 0, 0}},    {"title", {true, 0, 0}},    {"capitalize", {true, 0, 0}},
        {"replace", {true, 2, 2}},  {"split", {true, 0, 1}},    {"get", {false, 1, 2}},
        {"items", {false, 0, 0}},   {"keys", {false, 0, 0}},    {"values", {false, 0, 0}}};
    return table;
  }

  static Value method(const Value& object, const std::string& name) {
    const auto known = methods().find(name);
    if (known == methods().end() ||
        !(known->second.on_string ? object.data.is_string() : object.data.is_object()))
      return Value::undefined(name);
    Value m;
    m.kind = Value::kCallable;
    m.callable = name;
    m.self = std::make_shared<const Value>(object);
    return m;
  }

  Value item_of(const Value& object, const Value& key, int line) const {
    if (object.is_undefined()) fail(line, undefined_message(object) + " (reading an item)");
    if (object.kind == Value::kNamespace) {
      if (key.is_string()) return attribute(object, key.data.get<std::string>(), line);
      return Value::undefined("item");
    }
    if (object.kind != Value::kData) return Value::undefined("item");
    const json& j = object.data;
    if (j.is_object()) {
      if (key.is_string() && j.contains(key.data.get<std::string>()))
        return Value::of(j[key.data.get<std::string>()]);
      if (key.is_string()) return attribute(object, key.data.get<std::string>(), line);
      return Value::undefined("item");
    }
    if ((j.is_array() || j.is_string()) && key.kind == Value::kData &&
        key.data.is_number_integer()) {
      if (j.is_array()) {
        int64_t i = key.data.get<int64_t>(), n = int64_t(j.size());
        if (i < 0) i += n;
        return i >= 0 && i < n ? Value::of(j[size_t(i)]) : Value::undefined("item");
      }
      const std::u32string s = unicode::to_code_points(j.get<std::string>());
      int64_t i = key.data.get<int64_t>(), n = int64_t(s.size());
      if (i < 0) i += n;
      return i >= 0 && i < n ? Value::of(unicode::to_utf8(s.substr(size_t(i), 1)))
                             : Value::undefined("item");
    }
    if (key.is_string()) return attribute(object, key.data.get<std::string>(), line);
    return Value::undefined("item");
  }

  // Python's slice of a list or a string (by code points).
  Value slice(const Expr& e) {
    const Value object = eval(*e.args[0]);
    if (object.is_undefined()) fail(e.line, undefined_message(object) + " (slicing)");
    auto bound = [&](size_t i) -> std::optional<int64_t> {
      if (!e.args[i]) return std::nullopt;
      const Value v = eval(*e.args[i]);
      if (v.is_none()) return std::nullopt;
      if (v.kind != Value::kData || !v.data.is_number_integer())
        fail(e.line, "slice indices must be integers");
      return v.data.get<int64_t>();
    };
    const std::optional<int64_t> start = bound(1), stop = bound(2), step_given = bound(3);
    const int64_t step = step_given.value_or(1);
    if (step == 0) fail(e.line, "slice step cannot be zero");
    const bool is_string = object.is_string();
    if (object.kind != Value::kData || (!is_string && !object.data.is_array()))
      fail(e.line, "only lists and strings can be sliced");
    const std::u32string text =
        is_string ? unicode::to_code_points(object.data.get<std::string>()) : U"";
    const int64_t n = is_string ? int64_t(text.size()) : int64_t(object.data.size());
    auto clamp = [&](std::optional<int64_t> v, int64_t if_none) {
      if (!v) return if_none;
      int64_t x = *v < 0 ? *v + n : *v;
      return step > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t from = clamp(start, step > 0 ? 0 : n - 1), to = clamp(stop, step > 0 ? n : -1);
    json list = json::array();
    std::u32string picked;
    for (int64_t i = from; step > 0 ? i < to : i > to; i += step) {
      if (is_string)
        picked += text[size_t(i)];
      else
        list.push_back(object.data[size_t(i)]);
    }
    return is_string ? Value::of(unicode::to_utf8(picked)) : Value::of(list);
  }

  // --- calls: the globals and the methods
  struct Args {
    std::vector<Value> positional;
    std::map<std::string, Value> keyword;
  };
  Args arguments(const Expr& e, size_t from) {
    Args a;
    for (size_t i = from; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) a.keyword[k] = eval(*v);
    return a;
  }
  // Refuses other argument counts (and keywords) than those handled, rather than ignore them.
  void expect_args(const Args& a, size_t least, size_t most, const std::string& what,
                   int line) const {
    if (a.positional.size() < least || a.positional.size() > most || !a.keyword.empty())
      fail(line, what + " takes " + std::to_string(least) +
                     (most > least ? " to " + std::to_string(most) : "") +
                     " positional argument(s) here");
  }
  std::string string_arg(const Args& a, size_t i, const std::string& what, int line) const {
    if (i >= a.positional.size() || !a.positional[i].is_string())
      fail(line, what + " takes a string argument");
    return a.positional[i].data.get<std::string>();
  }

  Value call(const Expr& e) {
    const Value callee = eval(*e.args[0]);
    if (callee.kind != Value::kCallable)
      fail(e.line, callee.is_undefined() ? undefined_message(callee)
                                         : "a value that is no function is called");
    const Args a = arguments(e, 1);
    const std::string& f = callee.callable;
    if (callee.self) {
      const MethodInfo& info = methods().at(f);
      expect_args(a, info.least, info.most, "." + f, e.line);
    }
    if (!callee.self) {
      if (f == "raise_exception")
        fail(e.line,
             "the template raised: " + (a.positional.empty() ? "" : python_str(a.positional[0])));
      if (f == "namespace") {
        if (!a.positional.empty()) fail(e.line, "namespace takes keyword arguments only here");
        Value ns;
        ns.kind = Value::kNamespace;
        ns.attributes = std::make_shared<json>(json::object());
        for (const auto& [k, v] : a.keyword) (*ns.attributes)[k] = to_json(v, e.line);
        return ns;
      }
      // range
      std::vector<int64_t> bounds;
      for (const Value& v : a.positional) {
        if (v.kind != Value::kData || !v.data.is_number_integer())
          fail(e.line, "range takes integers");
        bounds.push_back(v.data.get<int64_t>());
      }
      if (bounds.empty() || bounds.size() > 3) fail(e.line, "range takes 1 to 3 arguments");
      const int64_t start = bounds.size() > 1 ? bounds[0] : 0,
                    stop = bounds.size() > 1 ? bounds[1] : bounds[0];
      const int64_t step = bounds.size() > 2 ? bounds[2] : 1;
      if (step == 0) fail(e.line, "range step cannot be zero");
      const double count = std::ceil((double(stop) - double(start)) / double(step));
      if (count > kMaxRange) fail(e.line, "a range longer than 100000 (Jinja2's sandbox limit)");
      json list = json::array();
      for (int64_t n = 0; n < int64_t(count); ++n) list.push_back(start + n * step);
      return Value::of(list);
    }
    const json& self = callee.self->data;
    if (self.is_object()) {
      if (f == "get") {
        const std::string key = string_arg(a, 0, ".get", e.line);
        if (self.contains(key)) return Value::of(self[key]);
        return a.positional.size() > 1 ? a.positional[1] : Value::of(nullptr);
      }
      json out = json::array();
      for (const auto& [k, v] : self.items()) {
        if (f == "items")
          out.push_back(json::array({k, v}));
        else if (f == "keys")
          out.push_back(k);
        else
          out.push_back(v);
      }
      return Value::of(out);
    }
    const std::string s = self.get<std::string>();
    if (f == "strip" || f == "lstrip" || f == "rstrip") {
      if (!a.positional.empty() && !a.positional[0].is_none()) {
        const std::string chars = string_arg(a, 0, "." + f, e.line);
        const std::u32string set = unicode::to_code_points(chars);
        std::u32string t = unicode::to_code_points(s);
        size_t begin = 0, end = t.size();
        if (f != "rstrip")
          while (begin < end && set.find(t[begin]) != std::u32string::npos) ++begin;
        if (f != "lstrip")
          while (end > begin && set.find(t[end - 1]) != std::u32string::npos) --end;
        return Value::of(unicode::to_utf8(t.substr(begin, end - begin)));
      }
      return Value::of(unicode::python_strip(s, f != "rstrip", f != "lstrip"));
    }
    if (f == "startswith")
      return Value::of(s.rfind(string_arg(a, 0, ".startswith", e.line), 0) == 0);
    if (f == "endswith") {
      const std::string suffix = string_arg(a, 0, ".endswith", e.line);
      return Value::of(s.size() >= suffix.size() &&
                       s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0);
    }
    if (f == "upper" || f == "lower" || f == "title" || f == "capitalize")
      return Value::of(change_case(s, f, e.line));
    if (f == "replace") {
      const std::string from = string_arg(a, 0, ".replace", e.line),
                        to = string_arg(a, 1, ".replace", e.line);
      if (from.empty()) fail(e.line, ".replace of an empty text is not supported");
      return Value::of(sized(replace_all(s, from, to), e.line));
    }
    // split
    json parts = json::array();
    if (a.positional.empty() || a.positional[0].is_none()) {
      std::string word;
      for (const char32_t c : unicode::to_code_points(s)) {
        if (unicode::is_python_space(c)) {
          if (!word.empty()) parts.push_back(word);
          word.clear();
        } else {
          unicode::append_utf8(c, &word);
        }
      }
      if (!word.empty()) parts.push_back(word);
      return Value::of(parts);
    }
    const std::string sep = string_arg(a, 0, ".split", e.line);
    if (sep.empty()) fail(e.line, ".split: empty separator");
    size_t from = 0;
    for (size_t at = s.find(sep); at != std::string::npos; at = s.find(sep, from)) {
      parts.push_back(s.substr(from, at - from));
      from = at + sep.size();
    }
    parts.push_back(s.substr(from));
    return Value::of(parts);
  }

  static std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    if (from.empty()) return s;
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
    return s;
  }

  // Jinja2's title filter: each piece after a run of whitespace, "-", "(", "{", "[" or "<"
  // upper-cased at its first character and lower-cased after (ASCII; see change_case).
  std::string jinja_title(const std::string& s, int line) const {
    std::string out = change_case(s, "lower", line);
    bool start = true;
    for (char& c : out) {
      const bool separator = std::isspace(static_cast<unsigned char>(c)) || c == '-' || c == '(' ||
                             c == '{' || c == '[' || c == '<';
      if (start && !separator) c = char(std::toupper(static_cast<unsigned char>(c)));
      start = separator;
    }
    return out;
  }

  // ASCII case changes; a non-ASCII letter is refused rather than left as Python would change it.
  std::string change_case(const std::string& s, const std::string& how, int line) const {
    std::string out = s;
    bool word_start = true;
    for (size_t i = 0; i < out.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(out[i]);
      if (c >= 0x80) fail(line, how + " of a non-ASCII text is not supported");
      const bool upper = how == "upper" || ((how == "title" || how == "capitalize") && word_start);
      out[i] = char(upper ? std::toupper(c) : std::tolower(c));
      if (how == "title") word_start = !std::isalpha(c);
      if (how == "capitalize") word_start = false;
    }
    return out;
  }

  // --- filters
  Value filter(const Expr& e) {
    const Value v = eval(*e.args[0]);
    const Args a = arguments(e, 1);
    const std::string& f = e.name;
    if (f == "default" || f == "d") {
      const bool boolean = (a.positional.size() > 1 && truthy(a.positional[1])) ||
                           (a.keyword.count("boolean") && truthy(a.keyword.at("boolean")));
      const bool use_default = v.is_undefined() || (boolean && !truthy(v));
      return use_default ? (a.positional.empty() ? Value::of("") : a.positional[0]) : v;
    }
    if (f == "string") return Value::of(python_str(v));
    if (f == "tojson") {  // transformers' json.dumps(x, ensure_ascii=False, indent=indent)
      std::string out;
      int indent = -1;
      if (!a.positional.empty() || a.keyword.size() > a.keyword.count("indent"))
        fail(e.line, "tojson takes indent= alone here");
      if (a.keyword.count("indent")) {
        const Value& given = a.keyword.at("indent");
        if (given.is_none()) {
        } else if (given.kind == Value::kData && given.data.is_number_integer() &&
                   given.data.get<int64_t>() >= 0 && given.data.get<int64_t>() <= 64) {
          indent = int(given.data.get<int64_t>());
        } else {
          fail(e.line, "tojson's indent is a number from 0 to 64 here");
        }
      }
      python_json(to_json(v, e.line), indent, 0, out);
      return Value::of(out);
    }
    if (v.is_undefined()) fail(e.line, undefined_message(v) + " (filter " + f + ")");
    static const std::map<std::string, std::pair<size_t, size_t>> counts = {
        {"trim", {0, 0}},  {"length", {0, 0}}, {"count", {0, 0}},      {"upper", {0, 0}},
        {"lower", {0, 0}}, {"title", {0, 0}},  {"capitalize", {0, 0}}, {"replace", {2, 2}},
        {"join", {0, 1}},  {"list", {0, 0}},   {"first", {0, 0}},      {"last", {0, 0}},
        {"items", {0, 0}}};
    if (const auto count = counts.find(f); count != counts.end())
      expect_args(a, count->second.first, count->second.second, f, e.line);
    if (f == "trim") {
      if (!v.is_string()) return Value::of(unicode::python_strip(python_str(v)));
      return Value::of(unicode::python_strip(v.data.get<std::string>()));
    }
    if (f == "length" || f == "count") {
      if (v.is_string())
        return Value::of(int64_t(unicode::to_code_points(v.data.get<std::string>()).size()));
      if (v.kind == Value::kData && (v.data.is_array() || v.data.is_object()))
        return Value::of(int64_t(v.data.size()));
      fail(e.line, "length of a value that has none");
    }
    if (f == "title") return Value::of(jinja_title(python_str(v), e.line));
    if (f == "upper" || f == "lower" || f == "capitalize")
      return Value::of(change_case(python_str(v), f, e.line));
    if (f == "replace") {
      const std::string from = string_arg(a, 0, "replace", e.line);
      if (from.empty()) fail(e.line, "replace of an empty text is not supported");
      return Value::of(
          sized(replace_all(python_str(v), from, string_arg(a, 1, "replace", e.line)), e.line));
    }
    if (f == "join") {
      std::string out, sep = a.positional.empty() ? "" : python_str(a.positional[0]);
      bool first = true;
      for (const Value& x : iterate(v, e.line)) {
        out += (first ? "" : sep) + python_str(x);
        first = false;
        if (double(out.size()) > kMaxSize) fail(e.line, "too long a text");
      }
      return Value::of(out);
    }
    if (f == "list") {
      json list = json::array();
      for (const Value& x : iterate(v, e.line)) list.push_back(to_json(x, e.line));
      return Value::of(list);
    }
    if (f == "first" || f == "last") {
      const std::vector<Value> items = iterate(v, e.line);
      if (items.empty()) return Value::undefined(f);
      return f == "first" ? items.front() : items.back();
    }
    if (f == "items") {
      if (v.kind != Value::kData || !v.data.is_object())
        fail(e.line, "items of a value that is no dict");
      json out = json::array();
      for (const auto& [k, x] : v.data.items()) out.push_back(json::array({k, x}));
      return Value::of(out);
    }
    if (f == "select" || f == "reject" || f == "selectattr" || f == "rejectattr")
      return select(f, v, a, e.line);
    if (f == "map") {
      if (!a.keyword.count("attribute") || !a.keyword.at("attribute").is_string() ||
          !a.positional.empty())
        fail(e.line, "map is supported with attribute= only");
      json out = json::array();
      for (const Value& item : iterate(v, e.line)) {
        Value x = attribute_path(item, a.keyword.at("attribute").data.get<std::string>(), e.line);
        if (x.is_undefined() && a.keyword.count("default")) x = a.keyword.at("default");
        out.push_back(to_json(x, e.line));
      }
      return Value::of(out);
    }
    if (f == "int") {  // Jinja2's: int(value), else int(float(value)), else 0
      if (!a.positional.empty() || !a.keyword.empty()) fail(e.line, "int takes no arguments here");
      if (v.kind != Value::kData) return Value::of(int64_t(0));
      if (v.data.is_boolean()) return Value::of(int64_t(v.data.get<bool>()));
      if (v.data.is_number_integer()) return v;
      if (v.data.is_number()) return Value::of(truncated(v.data.get<double>(), e.line));
      if (!v.data.is_string()) return Value::of(int64_t(0));
      return Value::of(python_int(unicode::python_strip(v.data.get<std::string>()), e.line));
    }
    fail(e.line, "the filter '" + f + "' is not supported");
  }

  int64_t truncated(double d, int line) const {
    if (std::isnan(d) || std::isinf(d)) return 0;  // int() raises, the filter's default
    if (std::abs(d) >= 9.2e18) fail(line, "an integer beyond 64 bits");
    return int64_t(d);
  }

  // Python's int(text) (a sign, digits, single underscores between them), else
  // int(float(text)) for a decimal number, else 0.
  int64_t python_int(const std::string& text, int line) const {
    std::string digits;
    size_t at = 0;
    if (at < text.size() && (text[at] == '+' || text[at] == '-')) digits += text[at++];
    bool plain = at < text.size();
    for (size_t i = at; i < text.size() && plain; ++i) {
      if (std::isdigit(static_cast<unsigned char>(text[i])))
        digits += text[i];
      else
        plain = text[i] == '_' && i > at && i + 1 < text.size() && text[i - 1] != '_' &&
                std::isdigit(static_cast<unsigned char>(text[i + 1]));
    }
    if (plain) {
      int64_t value = 0;
      const char* begin = digits.data() + (digits[0] == '+');
      const auto [end, ec] = std::from_chars(begin, digits.data() + digits.size(), value);
      if (ec != std::errc() || end != digits.data() + digits.size())
        fail(line, "an integer beyond 64 bits");
      return value;
    }
    static const std::regex decimal(R"([+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)");
    if (!std::regex_match(text, decimal)) return 0;
    return truncated(std::strtod(text.c_str(), nullptr), line);
  }

  // --- tests
  bool test(const Expr& e) {
    const Value v = eval(*e.args[0]);
    const Args a = arguments(e, 1);
    return apply_test(e.name, v, a.positional, e.line);
  }

  bool apply_test(const std::string& t, const Value& v, const std::vector<Value>& args,
                  int line) const {
    const bool data = v.kind == Value::kData;
    if (t == "defined" || t == "undefined") return v.is_undefined() == (t == "undefined");
    if (t == "none") return v.is_none();
    if (t == "true" || t == "false")
      return data && v.data.is_boolean() && v.data.get<bool>() == (t == "true");
    if (t == "boolean") return data && v.data.is_boolean();
    if (t == "string") return v.is_string();
    if (t == "number") return data && (v.data.is_number() || v.data.is_boolean());  // bool is int
    if (t == "integer") return data && v.data.is_number_integer();
    if (t == "float") return data && v.data.is_number_float();
    if (t == "mapping") return (data && v.data.is_object()) || v.kind == Value::kNamespace;
    if (t == "iterable" && v.is_undefined()) return true;  // Undefined iterates as empty
    if (t == "sequence" || t == "iterable")
      return data && (v.data.is_array() || v.data.is_string() || v.data.is_object());
    if (t == "callable") return v.kind == Value::kCallable;
    if (t == "equalto" || t == "eq" || t == "==" || t == "sameas" || t == "ne" || t == "!=") {
      if (args.empty()) fail(line, "the test '" + t + "' takes an argument");
      return equal(v, args[0]) != (t == "ne" || t == "!=");
    }
    if (t == "in") {
      if (args.empty()) fail(line, "the test 'in' takes an argument");
      return contains(args[0], v, line);
    }
    if (t == "odd" || t == "even" || t == "divisibleby") {
      if (!data || !v.data.is_number_integer()) fail(line, "the test '" + t + "' takes an integer");
      const int64_t x = v.data.get<int64_t>();
      if (t == "divisibleby") {
        if (args.empty() || args[0].kind != Value::kData || !args[0].data.is_number_integer() ||
            args[0].data.get<int64_t>() == 0)
          fail(line, "divisibleby takes a nonzero integer");
        return x % args[0].data.get<int64_t>() == 0;
      }
      return (x % 2 != 0) == (t == "odd");
    }
    fail(line, "the test '" + t + "' is not supported");
  }

  // select / reject (a test on each item) and selectattr / rejectattr (on an attribute of
  // each; without a test, its truth).
  Value select(const std::string& f, const Value& v, const Args& a, int line) const {
    const bool by_attribute = f == "selectattr" || f == "rejectattr";
    const bool keep = f == "select" || f == "selectattr";
    size_t next = 0;
    std::string attribute;
    if (by_attribute) {
      if (a.positional.empty() || !a.positional[0].is_string())
        fail(line, f + " takes an attribute name");
      attribute = a.positional[next++].data.get<std::string>();
    }
    std::string test_name;
    if (next < a.positional.size()) {
      if (!a.positional[next].is_string()) fail(line, f + ": a test's name is a string");
      test_name = a.positional[next++].data.get<std::string>();
    }
    const std::vector<Value> test_args(a.positional.begin() + long(next), a.positional.end());
    json kept = json::array();
    for (const Value& item : iterate(v, line)) {
      const Value subject = by_attribute ? attribute_path(item, attribute, line) : item;
      const bool passes =
          test_name.empty() ? truthy(subject) : apply_test(test_name, subject, test_args, line);
      if (passes == keep) kept.push_back(to_json(item, line));
    }
    return Value::of(kept);
  }

  // Jinja2's attribute paths in filters: "a.b" and list indices "a.0".
  Value attribute_path(const Value& item, const std::string& path, int line) const {
    Value v = item;
    size_t from = 0;
    while (true) {
      const size_t dot = path.find('.', from);
      const std::string part =
          path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
      int64_t index = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), index);
      const bool numeric =
          !part.empty() && ec == std::errc() && end == part.data() + part.size() && part[0] != '-';
      if (v.is_undefined()) return v;
      v = numeric ? item_of(v, Value::of(index), line) : item_of(v, Value::of(part), line);
      if (dot == std::string::npos) return v;
      from = dot + 1;
    }
  }

  std::string where_;
  std::vector<std::map<std::string, Value>> frames_;
  int line_ = 1;
  int64_t steps_ = 0;
};

}  // namespace

std::string render_jinja(const std::string& source, const nlohmann::ordered_json& variables,
                         const std::string& where) {
  Lexer lexer(source, where);
  Parser parser(lexer.pieces(), where);
  const Body body = parser.parse();
  Renderer renderer(variables, where);
  std::string out;
  renderer.render(body, out);
  return out;
}

}  // namespace kvb
