// The nearest valid name to a mistyped one, for "did you mean" in one-line input errors (the
// CLI's commands and options, methods, presets, datasets, JSON keys).
#pragma once
#include <string>
#include <vector>

namespace kvb {

// The one of `candidates` nearest to `typo` (at most 2 edits, or a unique prefix), else "".
std::string closest_name(const std::string& typo, const std::vector<std::string>& candidates);

// " (did you mean NAME?)" for closest_name's answer, or "" where there is none.
std::string did_you_mean(const std::string& typo, const std::vector<std::string>& candidates);

}  // namespace kvb
