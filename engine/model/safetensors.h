// Defensive reader (and writer) of the safetensors format: 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the data. Every malformed input is an InputError naming the file (and tensor).
#pragma once
#include <ATen/ATen.h>

#include "engine/model/safetensors_header.h"  // TensorEntry, parse_safetensors

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kvb {

// A memory-mapped safetensors file.
class SafetensorsFile {
 public:
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;  // owns the mapping
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  const std::string& path() const { return path_; }
  const std::map<std::string, TensorEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // Copies the tensor out of the mapping, converted to `dtype` (F16/BF16 -> f32 etc.).
  // Throws InputError naming file and tensor when absent.
  at::Tensor load(const std::string& name, at::ScalarType dtype = at::kFloat) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;  // mapping of the whole file
  size_t size_ = 0;
  size_t data_start_ = 0;  // 8 + header length
  std::map<std::string, TensorEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (contiguous, any of f32/f16/bf16) to `path` atomically (temp file + rename).
void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace kvb
