// File-system helpers that must not go through std::filesystem.
#pragma once
#include <string>

namespace kvb {

// Deletes `path` and, for a folder, everything below it; symbolic links are removed, never
// followed. Returns false (errno set) when something could not be removed; a missing `path` is
// not an error.
//
// Why not std::filesystem::remove_all: pip's CUDA libtorch.so exports its own copies of
// libstdc++'s std::filesystem functions (pytorch/pytorch#133437); kvbench linked against it
// binds remove_all to that copy and crashes. POSIX nftw has no such twin.
bool remove_tree(const std::string& path);

// Writes `text` to `path` whole or not at all: into `path`.tmp, then renamed over `path`. An
// InputError "<path>: cannot write (<reason>)" where that fails (a missing folder, a folder at
// `path`, no permission, a full disk); the temporary file is removed then.
void write_file_atomically(const std::string& path, const std::string& text);

// Whether `path` names a JSON or JSON Lines file (.json, .jsonl, in any case): text read from
// it as bytes would hold its quotes and escapes.
bool is_json_file_name(const std::string& path);

}  // namespace kvb
