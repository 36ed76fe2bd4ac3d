#include "engine/common/shared_folder.h"

#include <cstdlib>
#include <filesystem>

namespace kvb {
namespace {

std::string shared_from_environment() {
  const char* env = std::getenv("KVBENCH_SHARED");
  return env && *env ? env : "";
}

}  // namespace

std::string shared_folder() {
  const std::string from_env = shared_from_environment();
  const std::string dir = from_env.empty() ? KVBENCH_SOURCE_DIR "/../shared" : from_env;
  std::string normal = std::filesystem::absolute(dir).lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();  // "a/b/" from "a/b/."
  return normal;
}

std::string expand_shared(const std::string& text) {
  const std::string placeholder = kSharedPlaceholder;
  std::string out = text;
  const std::string folder = shared_folder();
  for (size_t at = out.find(placeholder); at != std::string::npos;
       at = out.find(placeholder, at + folder.size()))
    out.replace(at, placeholder.size(), folder);
  return out;
}

bool mentions_shared(const std::string& text) {
  return text.find(kSharedPlaceholder) != std::string::npos;
}

std::string shared_folder_hint() {
  const std::string origin = shared_from_environment().empty() ? "../shared beside the checkout"
                                                               : "from KVBENCH_SHARED";
  return std::string(kSharedPlaceholder) + " is " + shared_folder() + " (" + origin +
         "); set KVBENCH_SHARED to the folder that holds models/ and data/";
}

}  // namespace kvb
