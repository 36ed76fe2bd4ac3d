#include "engine/common/files.h"

#include <ftw.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "engine/common/error.h"
#include "engine/common/format.h"

namespace kvb {
namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return std::remove(path) == 0 ? 0 : -1;  // unlink for files and links, rmdir for folders
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  bool written;
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    written = file && (file << text) && file.flush();
  }
  const int reason = errno;
  if (written && std::rename(tmp.c_str(), path.c_str()) == 0) return;
  const int why = written ? errno : reason;
  std::remove(tmp.c_str());
  throw InputError(path + ": cannot write (" + std::strerror(why) + ")");
}

bool remove_tree(const std::string& path) {
  // FTW_DEPTH: a folder's entries before the folder; FTW_PHYS: links themselves, not targets.
  if (nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0) return true;
  return errno == ENOENT;
}

bool is_json_file_name(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return ends_with(lower, ".json") || ends_with(lower, ".jsonl");
}

}  // namespace kvb
