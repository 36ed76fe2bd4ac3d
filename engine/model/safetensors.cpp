#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/common/error.h"

namespace kvb {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian and is copied out without byte swapping");

at::ScalarType scalar_type_of(const std::string& dtype) {
  if (dtype == "F16") return at::kHalf;
  if (dtype == "BF16") return at::kBFloat16;
  return at::kFloat;  // parse_safetensors_header admits nothing else
}

// The safetensors name of a tensor's dtype; InputError naming file and tensor otherwise.
std::string dtype_name_of(const at::Tensor& t, const std::string& path, const std::string& name) {
  switch (t.scalar_type()) {
    case at::kFloat: return "F32";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    default:
      throw InputError(path + ": tensor '" + name + "': cannot write dtype " +
                       std::string(c10::toString(t.scalar_type())) + " (F32, F16, BF16 only)");
  }
}

// Maps the whole file read-only. Returns nullptr for an empty file (mmap refuses length 0).
const uint8_t* map_file(const std::string& path, size_t& size) {
  // O_NONBLOCK: a FIFO without a writer is refused below instead of blocking the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path + ": not a regular file");
  }
  size = static_cast<size_t>(st.st_size);
  void* p = size == 0 ? nullptr : mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);  // the mapping stays valid without the descriptor
  if (p == MAP_FAILED) throw InputError(path + ": cannot mmap: " + std::strerror(map_errno));
  return static_cast<const uint8_t*>(p);
}

// Header {name: {dtype, shape, data_offsets}, "__metadata__": {...}} for `tensors` laid out
// back to back in name order (std::map order), plus the total data size.
nlohmann::json build_header(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") throw InputError(path + ": '__metadata__' is not a tensor name");
    uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", dtype_name_of(t, path, name)},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  return header;
}

// The header text padded with spaces (JSON whitespace) so the data section starts 8-aligned.
std::string padded_header_text(const nlohmann::json& header, const std::string& path) {
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error&) {
    throw InputError(path + ": tensor or metadata names are not valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

void write_all(std::FILE* f, const void* data, size_t n, const std::string& tmp) {
  if (n != 0 && std::fwrite(data, 1, n, f) != n)
    throw InputError(tmp + ": write failed: " + std::strerror(errno));
}

void write_file(const std::string& tmp, const std::string& header,
                const std::map<std::string, at::Tensor>& tensors) {
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw InputError(tmp + ": cannot create: " + std::strerror(errno));
  try {
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t(header.size()) >> (8 * i));
    write_all(f, len, 8, tmp);
    write_all(f, header.data(), header.size(), tmp);
    for (const auto& [name, t] : tensors) {
      at::Tensor c = t.contiguous().cpu();
      write_all(f, c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size(), tmp);
    }
  } catch (...) {
    std::fclose(f);
    throw;
  }
  if (std::fclose(f) != 0) throw InputError(tmp + ": write failed: " + std::strerror(errno));
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  // Owned from the start, so the destructor unmaps when parsing throws.
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->data_ = map_file(path, file->size_);
  SafetensorsHeader h = parse_safetensors_header(file->data_, file->size_, path);
  file->data_start_ = h.data_start;
  file->entries_ = std::move(h.entries);
  file->metadata_ = std::move(h.metadata);
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

at::Tensor SafetensorsFile::load(const std::string& name, at::ScalarType dtype) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw InputError(path_ + ": no tensor named '" + name + "'");
  const TensorEntry& e = it->second;
  // Offsets in files from other writers need not be aligned to the element size, so the bytes
  // are copied into a fresh (aligned) tensor rather than viewed in place with from_blob.
  at::Tensor raw = at::empty(e.shape, at::TensorOptions().dtype(scalar_type_of(e.dtype)));
  size_t bytes = static_cast<size_t>(e.end - e.begin);
  if (bytes != 0) std::memcpy(raw.data_ptr(), data_ + data_start_ + e.begin, bytes);
  return raw.to(dtype);
}

void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string header = padded_header_text(build_header(path, tensors, metadata), path);
  std::string tmp = path + ".tmp";
  try {
    write_file(tmp, header, tensors);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw InputError(path + ": cannot rename " + tmp + " into place: " + std::strerror(err));
  }
}

}  // namespace kvb
