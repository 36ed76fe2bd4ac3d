// The torch-free half of the safetensors reader: parsing and validating the header of a file
// held in memory. Kept free of ATen so that the fuzz target builds from this file alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvb {

struct TensorEntry {
  std::string dtype;  // "F32", "F16", "BF16" (others are rejected with a clear error)
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offsets relative to the start of the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::map<std::string, TensorEntry> entries;
  std::map<std::string, std::string> metadata;  // "__metadata__", string -> string
  uint64_t data_start = 0;                      // 8 + header length: where offset 0 lies
};

// Bytes per element of a supported dtype name, 0 for anything else.
size_t safetensors_dtype_size(const std::string& dtype);

// Parses and validates the header of a whole file held in `bytes` (size `size`):
// header length within the file, JSON well-formed, known dtypes, byte count == product(shape) *
// dtype size, and the tensors tiling the data section without overlap, gap or trailing bytes. `path` is for messages only.
// Throws InputError naming `path` (and the tensor); never reads outside [bytes, bytes + size).
SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t size,
                                           const std::string& path);

// The entries of parse_safetensors_header.
std::map<std::string, TensorEntry> parse_safetensors(const uint8_t* bytes, size_t size,
                                                     const std::string& path);

}  // namespace kvb
