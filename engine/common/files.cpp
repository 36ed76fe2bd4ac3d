#include "engine/common/files.h"

#include <ftw.h>

#include <cerrno>
#include <cstdio>

namespace kvb {
namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return std::remove(path) == 0 ? 0 : -1;  // unlink for files and links, rmdir for folders
}

}  // namespace

bool remove_tree(const std::string& path) {
  // FTW_DEPTH: a folder's entries before the folder; FTW_PHYS: links themselves, not targets.
  if (nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0) return true;
  return errno == ENOENT;
}

}  // namespace kvb
