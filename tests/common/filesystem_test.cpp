// Every std::filesystem function kvbench's own code calls (harness/, methods/, datasets/,
// reports/, training/, kernels/), each on a temp dir with its result checked, one test per
// function so that CTest runs each in its own process.
//
// Why: pip's CUDA libtorch exports its own copies of libstdc++'s std::filesystem functions
// (pytorch/pytorch#133437). Linked against it, kvbench's calls may bind to those copies, built
// by another compiler against other internal layouts; std::filesystem::remove_all crashed that
// way (kvbench now uses kvb::remove_tree, engine/common/files.h). On a CUDA LibTorch build
// (ci/gpu_test.sh) a crash or a wrong result here names the function. The last test prints
// which library each out-of-line function binds to in this process (information, not a check).
//
// Whoever adds a std::filesystem call to kvbench adds it here.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "tests/test_util.h"

namespace kvb {
namespace {

namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// ---- path (header and out-of-line parts of libstdc++'s fs_path.cc) ---------------------------

TEST(Filesystem, PathDecomposesAndJoins) {
  const fs::path p("/models/dir.v2/model.safetensors");
  EXPECT_EQ(p.filename().string(), "model.safetensors");
  EXPECT_EQ(p.parent_path().string(), "/models/dir.v2");
  EXPECT_EQ(p.extension().string(), ".safetensors");
  EXPECT_EQ(p.stem().string(), "model");
  EXPECT_EQ(fs::path("results/runs/smoke.db").parent_path().string(), "results/runs");
  EXPECT_TRUE(fs::path("smoke.db").parent_path().empty());
  EXPECT_EQ((fs::path("/a/b") / "finalseg").string(), "/a/b/finalseg");
  EXPECT_EQ((fs::path("/a/b") / "finalseg" / "prob_emit.py").filename().string(), "prob_emit.py");
  EXPECT_TRUE(fs::path("models/x").is_relative());
  EXPECT_FALSE(fs::path("/models/x").is_relative());
  EXPECT_EQ(fs::path("/x/dir/").filename().string(), "");
  EXPECT_EQ(*fs::path("../a/b").begin(), fs::path(".."));
  std::vector<std::string> parts;
  for (const fs::path& part : fs::path("a/b/c.json")) parts.push_back(part.string());
  EXPECT_EQ(parts, (std::vector<std::string>{"a", "b", "c.json"}));
}

TEST(Filesystem, LexicallyNormal) {
  EXPECT_EQ(fs::path("/w/main/../shared/./models").lexically_normal().string(), "/w/shared/models");
  EXPECT_EQ(fs::path("a/./b/../c").lexically_normal().string(), "a/c");
  EXPECT_EQ(fs::path("a/b/..").lexically_normal().string(), "a/");
}

TEST(Filesystem, LexicallyRelative) {
  EXPECT_EQ(fs::path("/w/main/results/x.db").lexically_relative("/w/main").string(), "results/x.db");
  const fs::path outside = fs::path("/w/other/x.db").lexically_relative("/w/main");
  EXPECT_EQ(outside.string(), "../other/x.db");
  EXPECT_EQ(*outside.begin(), fs::path(".."));
  EXPECT_TRUE(fs::path("rel/x").lexically_relative("/w/main").empty());
}

// ---- operations (libstdc++'s fs_ops.cc, fs_dir.cc) -------------------------------------------

TEST(Filesystem, CurrentPathAndAbsolute) {
  char buffer[4096];
  ASSERT_NE(getcwd(buffer, sizeof buffer), nullptr);
  EXPECT_EQ(fs::current_path().string(), std::string(buffer));
  EXPECT_EQ(fs::absolute("runs/x.db").string(), std::string(buffer) + "/runs/x.db");
  EXPECT_EQ(fs::absolute("/tmp/x").string(), "/tmp/x");
}

TEST(Filesystem, TempDirectoryPath) {
  const fs::path tmp = fs::temp_directory_path();
  EXPECT_FALSE(tmp.empty());
  EXPECT_TRUE(fs::is_directory(tmp)) << tmp;
}

TEST(Filesystem, ExistsIsRegularFileIsDirectory) {
  test::TempDir dir;
  write_file(dir.file("f.json"), "{}");
  EXPECT_TRUE(fs::exists(dir.file("f.json")));
  EXPECT_TRUE(fs::exists(dir.path()));
  EXPECT_FALSE(fs::exists(dir.file("missing")));
  EXPECT_TRUE(fs::is_regular_file(dir.file("f.json")));
  EXPECT_FALSE(fs::is_regular_file(dir.path()));
  EXPECT_FALSE(fs::is_regular_file(dir.file("missing")));
  EXPECT_TRUE(fs::is_directory(dir.path()));
  EXPECT_FALSE(fs::is_directory(dir.file("f.json")));
  EXPECT_FALSE(fs::is_directory(dir.file("missing")));
}

TEST(Filesystem, CreateDirectories) {
  test::TempDir dir;
  EXPECT_TRUE(fs::create_directories(dir.file("a/b/c")));
  EXPECT_TRUE(fs::is_directory(dir.file("a/b/c")));
  EXPECT_FALSE(fs::create_directories(dir.file("a/b/c")));  // already there: not an error
  std::error_code ec;
  EXPECT_TRUE(fs::create_directories(fs::path(dir.file("x/y")), ec));
  EXPECT_FALSE(ec) << ec.message();
  write_file(dir.file("file"), "x");
  fs::create_directories(dir.file("file/sub"), ec);  // below a regular file
  EXPECT_TRUE(ec);
  EXPECT_THROW(fs::create_directories(dir.file("file/sub")), fs::filesystem_error);
}

TEST(Filesystem, IsEmpty) {
  test::TempDir dir;
  fs::create_directories(dir.file("empty"));
  fs::create_directories(dir.file("full"));
  write_file(dir.file("full/x"), "data");
  write_file(dir.file("empty_file"), "");
  EXPECT_TRUE(fs::is_empty(dir.file("empty")));
  EXPECT_FALSE(fs::is_empty(dir.file("full")));
  EXPECT_TRUE(fs::is_empty(dir.file("empty_file")));
  EXPECT_FALSE(fs::is_empty(dir.file("full/x")));
  std::error_code ec;
  EXPECT_TRUE(fs::is_empty(dir.file("empty"), ec));
  EXPECT_FALSE(ec);
  EXPECT_FALSE(fs::is_empty(dir.file("full"), ec));
  EXPECT_FALSE(ec);
  (void)fs::is_empty(dir.file("missing"), ec);
  EXPECT_TRUE(ec);
}

TEST(Filesystem, DirectoryIterator) {
  test::TempDir dir;
  write_file(dir.file("smoke.json"), "{}");
  write_file(dir.file("latency.json"), "{}");
  write_file(dir.file("notes.txt"), "");
  fs::create_directories(dir.file("sub.json.d"));
  std::vector<std::string> json, all;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    all.push_back(entry.path().filename().string());
    if (entry.path().extension() == ".json") json.push_back(entry.path().stem().string());
  }
  std::sort(json.begin(), json.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(json, (std::vector<std::string>{"latency", "smoke"}));
  EXPECT_EQ(all, (std::vector<std::string>{"latency.json", "notes.txt", "smoke.json", "sub.json.d"}));
  EXPECT_THROW(fs::directory_iterator(dir.file("missing")), fs::filesystem_error);
}

TEST(Filesystem, Rename) {
  test::TempDir dir;
  write_file(dir.file("a.tmp"), "new");
  fs::rename(dir.file("a.tmp"), dir.file("a.db"));  // the merge's temp file onto its output
  EXPECT_FALSE(fs::exists(dir.file("a.tmp")));
  EXPECT_TRUE(fs::is_regular_file(dir.file("a.db")));
  std::error_code ec;
  write_file(dir.file("b.tmp"), "newer");
  fs::rename(dir.file("b.tmp"), dir.file("a.db"), ec);  // replaces an existing file
  EXPECT_FALSE(ec) << ec.message();
  std::ifstream in(dir.file("a.db"));
  std::string text;
  in >> text;
  EXPECT_EQ(text, "newer");
  // save_model: a finished temp folder replaces the target only when that is an empty folder.
  fs::create_directories(dir.file("tmp-model"));
  write_file(dir.file("tmp-model/config.json"), "{}");
  fs::create_directories(dir.file("model"));
  fs::rename(dir.file("tmp-model"), dir.file("model"), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(fs::is_regular_file(dir.file("model/config.json")));
  fs::create_directories(dir.file("tmp2"));
  fs::rename(dir.file("tmp2"), dir.file("model"), ec);  // not empty: refused
  EXPECT_TRUE(ec);
  EXPECT_TRUE(fs::is_regular_file(dir.file("model/config.json")));
}

TEST(Filesystem, Remove) {
  test::TempDir dir;
  write_file(dir.file("x.db"), "x");
  EXPECT_TRUE(fs::remove(dir.file("x.db")));
  EXPECT_FALSE(fs::exists(dir.file("x.db")));
  std::error_code ec;
  EXPECT_FALSE(fs::remove(dir.file("x.db-wal"), ec));  // missing: false, no error
  EXPECT_FALSE(ec) << ec.message();
  fs::create_directories(dir.file("d"));
  EXPECT_TRUE(fs::remove(dir.file("d"), ec));  // an empty folder
  EXPECT_FALSE(ec) << ec.message();
}

TEST(Filesystem, CanonicalAndWeaklyCanonical) {
  test::TempDir dir;
  fs::create_directories(dir.file("real/sub"));
  ASSERT_EQ(symlink(dir.file("real").c_str(), dir.file("link").c_str()), 0);
  const fs::path real = fs::canonical(dir.file("real"));
  EXPECT_EQ(fs::canonical(dir.file("link/sub/..")), real);
  EXPECT_TRUE(fs::is_regular_file(fs::canonical("/proc/self/exe")));
  EXPECT_THROW(fs::canonical(dir.file("missing")), fs::filesystem_error);
  std::error_code ec;
  // The existing head resolved, the missing tail appended (merge's duplicate-input check).
  EXPECT_EQ(fs::weakly_canonical(dir.file("link/new/../x.db"), ec), real / "x.db");
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(fs::weakly_canonical(dir.file("link/a.db"), ec), real / "a.db");
}

TEST(Filesystem, Permissions) {
  test::TempDir dir;
  write_file(dir.file("job.sbatch"), "#!/bin/bash\n");
  fs::permissions(dir.file("job.sbatch"), fs::perms::owner_read | fs::perms::owner_write,
                  fs::perm_options::replace);
  fs::permissions(dir.file("job.sbatch"),
                  fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add);
  const fs::perms p = fs::status(dir.file("job.sbatch")).permissions();
  EXPECT_EQ(p, fs::perms::owner_read | fs::perms::owner_write | fs::perms::owner_exec |
                   fs::perms::group_exec | fs::perms::others_exec);
  EXPECT_EQ(access(dir.file("job.sbatch").c_str(), X_OK), 0);
}

TEST(Filesystem, FileSize) {
  test::TempDir dir;
  write_file(dir.file("plot.png"), std::string(1234, 'x'));
  write_file(dir.file("empty.png"), "");
  EXPECT_EQ(fs::file_size(dir.file("plot.png")), 1234u);
  EXPECT_EQ(fs::file_size(dir.file("empty.png")), 0u);
  EXPECT_THROW((void)fs::file_size(dir.file("missing")), fs::filesystem_error);
}

// ---- where each out-of-line function binds -----------------------------------------------------

// The address a call from this binary reaches (a PIE binary loads it from the GOT: the
// definition the dynamic linker chose), as an object pointer for dladdr.
template <class F>
const void* address_of(F f) {
  static_assert(sizeof(F) >= sizeof(void*));
  const void* p;
  std::memcpy(&p, &f, sizeof p);  // a member function pointer: its first word (Itanium ABI)
  return p;
}

TEST(Filesystem, ReportsTheLibraryEachFunctionBindsTo) {
  using path = fs::path;
  struct Bound {
    const char* name;
    const void* address;
  };
  const std::vector<Bound> functions = {
      {"status", address_of(static_cast<fs::file_status (*)(const path&)>(&fs::status))},
      {"absolute", address_of(static_cast<path (*)(const path&)>(&fs::absolute))},
      {"canonical", address_of(static_cast<path (*)(const path&)>(&fs::canonical))},
      {"weakly_canonical(ec)",
       address_of(static_cast<path (*)(const path&, std::error_code&)>(&fs::weakly_canonical))},
      {"current_path", address_of(static_cast<path (*)()>(&fs::current_path))},
      {"temp_directory_path", address_of(static_cast<path (*)()>(&fs::temp_directory_path))},
      {"create_directories",
       address_of(static_cast<bool (*)(const path&)>(&fs::create_directories))},
      {"is_empty", address_of(static_cast<bool (*)(const path&)>(&fs::is_empty))},
      {"is_empty(ec)",
       address_of(static_cast<bool (*)(const path&, std::error_code&)>(&fs::is_empty))},
      {"file_size", address_of(static_cast<std::uintmax_t (*)(const path&)>(&fs::file_size))},
      {"remove(ec)",
       address_of(static_cast<bool (*)(const path&, std::error_code&)>(&fs::remove))},
      {"rename", address_of(static_cast<void (*)(const path&, const path&)>(&fs::rename))},
      {"permissions",
       address_of(static_cast<void (*)(const path&, fs::perms, fs::perm_options)>(&fs::permissions))},
      {"remove_all (not called by kvbench any more)",
       address_of(static_cast<std::uintmax_t (*)(const path&)>(&fs::remove_all))},
      {"path::lexically_normal", address_of(&path::lexically_normal)},
      {"path::lexically_relative", address_of(&path::lexically_relative)},
      {"path::parent_path", address_of(&path::parent_path)},
      {"path::compare", address_of(static_cast<int (path::*)(const path&) const>(&path::compare))},
      {"directory_iterator::operator++",
       address_of(static_cast<fs::directory_iterator& (fs::directory_iterator::*)()>(
           &fs::directory_iterator::operator++))},
  };
  std::string report;
  for (const Bound& f : functions) {
    Dl_info info{};
    std::string where = "(unknown)";
    if (dladdr(f.address, &info) != 0 && info.dli_fname) where = info.dli_fname;
    report += "  std::filesystem::" + std::string(f.name) + " -> " + where + "\n";
  }
  std::cout << "std::filesystem functions bind to (libstdc++ expected; a LibTorch library here "
               "is pytorch/pytorch#133437):\n"
            << report;
  RecordProperty("bindings", report);
}

}  // namespace
}  // namespace kvb
