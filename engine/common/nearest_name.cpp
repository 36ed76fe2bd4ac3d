#include "engine/common/nearest_name.h"

#include <algorithm>

namespace kvb {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_name(const std::string& typo, const std::vector<std::string>& candidates) {
  std::string best, prefixed;
  // More edits than a typo: 2 in a short word already make another ("gen" -> "run").
  size_t best_distance = typo.size() <= 4 ? 2 : 3, ties = 0, prefixes = 0;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(typo, c);
    if (d < best_distance) best = c, best_distance = d, ties = 0;
    else if (d == best_distance) ++ties;
    if (!typo.empty() && c.rfind(typo, 0) == 0) prefixed = c, ++prefixes;
  }
  if (!best.empty() && ties == 0) return best;
  return prefixes == 1 ? prefixed : "";
}

std::string did_you_mean(const std::string& typo, const std::vector<std::string>& candidates) {
  const std::string near = closest_name(typo, candidates);
  return near.empty() ? "" : " (did you mean " + near + "?)";
}

}  // namespace kvb
