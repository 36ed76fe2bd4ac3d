// RULER's scores (NVIDIA/RULER eval/synthetic/constants.py), per record, in [0, 100]. The
// per-task score is the mean over records (the runner's mean of per-sample scores).
#pragma once
#include <string>
#include <vector>

namespace kvb {

// 100 * fraction of `references` that occur in `prediction`, case-insensitively (both sides
// folded as Python's str.lower(), as RULER's metrics). 0 when there are no references.
double string_match_all(const std::string& prediction, const std::vector<std::string>& references);
// How many of `references` occur in `prediction`, as string_match_all counts them.
size_t references_found(const std::string& prediction, const std::vector<std::string>& references);

// 100 when any reference occurs in `prediction` (case-insensitively), else 0 (RULER's qa tasks).
double string_match_part(const std::string& prediction, const std::vector<std::string>& references);

}  // namespace kvb
