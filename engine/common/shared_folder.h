// Where kvbench finds the shared material too large for git (the stories260K checkpoint,
// haystack essays, word lists): one rule for suites, reproductions, train-tiny, tests and
// benchmarks.
#pragma once
#include <string>

namespace kvb {

// The placeholder that suite files and reproductions write for the shared folder, e.g.
// "${SHARED}/models/stories260K".
inline constexpr const char* kSharedPlaceholder = "${SHARED}";

// $KVBENCH_SHARED when set and not empty, else ../shared beside the checkout kvbench was built
// from; absolute and normalised. The folder need not exist.
std::string shared_folder();

// `text` with every ${SHARED} replaced by shared_folder().
std::string expand_shared(const std::string& text);
bool mentions_shared(const std::string& text);

// Where ${SHARED} pointed and how to point it elsewhere, for error messages:
// "${SHARED} is /work/shared (../shared beside the checkout); set KVBENCH_SHARED to the folder
// that holds models/ and data/".
std::string shared_folder_hint();

}  // namespace kvb
