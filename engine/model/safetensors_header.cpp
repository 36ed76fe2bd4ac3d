#include "engine/model/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "engine/common/error.h"

namespace kvb {
namespace {

using nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we, before allocating.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw InputError(path + ": " + what);
}

[[noreturn]] void fail(const std::string& path, const std::string& tensor,
                       const std::string& what) {
  throw InputError(path + ": tensor '" + tensor + "': " + what);
}

// The 8-byte little-endian header length, assembled byte by byte (no alignment, any host).
uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

json parse_header_json(const uint8_t* begin, const uint8_t* end, const std::string& path) {
  try {
    json j = json::parse(begin, end);
    if (!j.is_object()) fail(path, "header is JSON but not an object");
    return j;
  } catch (const json::parse_error& e) {
    // e.what() quotes raw bytes of the input; the offset is enough and keeps one clean line.
    fail(path, "header is not valid JSON (error at byte " + std::to_string(e.byte) + ")");
  } catch (const json::out_of_range&) {
    // Found by the fuzzer: a literal such as 1E400 is out_of_range, not a parse_error.
    fail(path, "header is not valid JSON (a number is out of range)");
  }
}

const json& require_field(const json& entry, const char* field, const std::string& path,
                          const std::string& name) {
  auto it = entry.find(field);
  if (it == entry.end()) fail(path, name, std::string("missing '") + field + "'");
  return *it;
}

std::string read_dtype(const json& entry, const std::string& path, const std::string& name) {
  const json& dtype = require_field(entry, "dtype", path, name);
  if (!dtype.is_string()) fail(path, name, "'dtype' must be a string");
  std::string s = dtype.get<std::string>();
  if (safetensors_dtype_size(s) == 0)
    fail(path, name, "unsupported dtype '" + s + "' (supported: F32, F16, BF16)");
  return s;
}

std::vector<int64_t> read_shape(const json& entry, const std::string& path,
                                const std::string& name) {
  const json& shape = require_field(entry, "shape", path, name);
  if (!shape.is_array()) fail(path, name, "'shape' must be an array of integers");
  std::vector<int64_t> dims;
  for (const json& d : shape) {
    if (!d.is_number_integer()) fail(path, name, "'shape' must be an array of integers");
    if (!d.is_number_unsigned()) fail(path, name, "negative dimension in 'shape'");
    uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path, name, "dimension " + std::to_string(v) + " in 'shape' is too large");
    dims.push_back(static_cast<int64_t>(v));
  }
  return dims;
}

void read_offsets(const json& entry, TensorEntry& out, const std::string& path,
                  const std::string& name) {
  const json& offsets = require_field(entry, "data_offsets", path, name);
  auto is_offset = [](const json& v) { return v.is_number_unsigned(); };
  if (!offsets.is_array() || offsets.size() != 2 || !is_offset(offsets[0]) ||
      !is_offset(offsets[1]))
    fail(path, name, "'data_offsets' must be [begin, end], two non-negative integers");
  out.begin = offsets[0].get<uint64_t>();
  out.end = offsets[1].get<uint64_t>();
  if (out.begin > out.end)
    fail(path, name, "data_offsets begin " + std::to_string(out.begin) + " > end " +
                         std::to_string(out.end));
}

// product(shape) * dtype size must equal end - begin; the product can overflow on hostile
// shapes, which is then reported as a mismatch rather than wrapping around.
void check_byte_count(const TensorEntry& t, const std::string& path, const std::string& name) {
  uint64_t bytes = safetensors_dtype_size(t.dtype);
  bool overflow = false;
  for (int64_t d : t.shape)
    overflow = overflow || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  uint64_t have = t.end - t.begin;
  if (overflow) fail(path, name, "shape is too large (byte count overflows)");
  if (bytes != have)
    fail(path, name, "data_offsets span " + std::to_string(have) + " bytes but shape and dtype " +
                         "need " + std::to_string(bytes));
}

TensorEntry parse_entry(const json& entry, uint64_t data_size, const std::string& path,
                        const std::string& name) {
  if (!entry.is_object()) fail(path, name, "entry must be an object");
  TensorEntry t;
  t.dtype = read_dtype(entry, path, name);
  t.shape = read_shape(entry, path, name);
  read_offsets(entry, t, path, name);
  if (t.end > data_size)
    fail(path, name, "data_offsets end " + std::to_string(t.end) + " is beyond the data section (" +
                         std::to_string(data_size) + " bytes)");
  check_byte_count(t, path, name);
  return t;
}

std::map<std::string, std::string> parse_metadata(const json& meta, const std::string& path) {
  const char* what = "'__metadata__' must be an object of strings";
  if (!meta.is_object()) fail(path, what);
  std::map<std::string, std::string> out;
  for (auto it = meta.begin(); it != meta.end(); ++it) {
    if (!it.value().is_string()) fail(path, std::string(what) + " (key '" + it.key() + "')");
    out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

// The reference (huggingface/safetensors) requires the tensors, in the order of their offsets, to
// tile the data section exactly: the first starts at 0, each starts where the previous one ended,
// the last ends at the end of the file. A hole or trailing bytes are what a damaged or
// hand-patched file looks like, and transformers refuses such a file, so kvbench does too.
void check_layout(const std::map<std::string, TensorEntry>& entries, uint64_t data_size,
                  const std::string& path) {
  std::vector<std::pair<const std::string*, const TensorEntry*>> by_offset;
  for (const auto& [name, t] : entries) by_offset.emplace_back(&name, &t);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) {
    return std::pair(a.second->begin, a.second->end) < std::pair(b.second->begin, b.second->end);
  });
  uint64_t covered = 0;  // the data section's bytes [0, covered) belong to the tensors seen
  const std::pair<const std::string*, const TensorEntry*>* previous = nullptr;
  for (const auto& entry : by_offset) {
    const auto& [name, t] = entry;
    if (t->begin < covered) {
      const auto& [prev_name, prev] = *previous;
      if (t->begin == t->end)  // no bytes, but not where the reference's order puts it
        fail(path, *name, "data_offsets begin " + std::to_string(t->begin) + " lies inside '" +
                              *prev_name + "' (" + std::to_string(prev->begin) + ".." +
                              std::to_string(prev->end) + ")");
      fail(path, "tensors '" + *prev_name + "' and '" + *name + "' have overlapping data_offsets");
    }
    if (t->begin > covered)
      fail(path, *name, "data_offsets begin " + std::to_string(t->begin) + " leaves bytes " +
                            std::to_string(covered) + ".." + std::to_string(t->begin) +
                            " of the data section in no tensor (safetensors allows no gaps)");
    covered = t->end;
    previous = &entry;
  }
  if (covered != data_size)
    fail(path, "the tensors end at byte " + std::to_string(covered) +
                   (previous ? " (the end of '" + *previous->first + "')" : std::string()) +
                   " of the data section but it has " + std::to_string(data_size) +
                   " bytes (safetensors allows no trailing bytes)");
}

}  // namespace

size_t safetensors_dtype_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t size,
                                           const std::string& path) {
  if (size < 8) fail(path, "not a safetensors file: shorter than 8 bytes");
  uint64_t header_len = read_u64_le(bytes);
  if (header_len > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(header_len) + " is larger than the " +
                   std::to_string(kMaxHeaderBytes) + "-byte limit");
  if (header_len > size - 8)
    fail(path, "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                   std::to_string(size) + " bytes)");
  SafetensorsHeader h;
  h.data_start = 8 + header_len;
  json j = parse_header_json(bytes + 8, bytes + h.data_start, path);
  uint64_t data_size = size - h.data_start;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__")
      h.metadata = parse_metadata(it.value(), path);
    else
      h.entries[it.key()] = parse_entry(it.value(), data_size, path, it.key());
  }
  check_layout(h.entries, data_size, path);
  return h;
}

std::map<std::string, TensorEntry> parse_safetensors(const uint8_t* bytes, size_t size,
                                                     const std::string& path) {
  return parse_safetensors_header(bytes, size, path).entries;
}

}  // namespace kvb
