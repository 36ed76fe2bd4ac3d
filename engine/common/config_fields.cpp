#include "engine/common/config_fields.h"

#include <cmath>
#include <sstream>

#include "engine/common/nearest_name.h"

namespace kvb {

namespace {

// A number as a config shows it: 1, 0.5, 1e-05.
std::string number_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

namespace check {

FieldCheck at_least(double min) {
  return {[min](const json& v) {
            return v.get<double>() >= min
                       ? ""
                       : "must be >= " + number_text(min) + ", got " + v.dump();
          },
          ">= " + number_text(min)};
}

FieldCheck in_interval(const std::string& interval) {
  // "[lo, hi]" with ( or ) for an open end.
  const bool lo_open = interval.front() == '(', hi_open = interval.back() == ')';
  const size_t comma = interval.find(',');
  const double lo = std::stod(interval.substr(1, comma - 1));
  const double hi = std::stod(interval.substr(comma + 1, interval.size() - comma - 2));
  return {[=](const json& v) {
            const double x = v.get<double>();
            const bool inside = (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
            return inside ? "" : "must be in " + interval + ", got " + v.dump();
          },
          "in " + interval};
}

FieldCheck odd_at_least_one() {
  return {[](const json& v) {
            const int64_t k = v.get<int64_t>();
            return k >= 1 && k % 2 == 1 ? "" : "must be odd and >= 1, got " + v.dump();
          },
          "odd, >= 1"};
}

FieldCheck one_of(std::vector<std::string> values) {
  std::string list;
  for (const std::string& v : values) list += (list.empty() ? "" : ", ") + v;
  return {[values, list](const json& v) {
            const std::string given = v.get<std::string>();
            for (const std::string& allowed : values)
              if (given == allowed) return std::string();
            return v.dump() + " is not one of " + list + did_you_mean(given, values);
          },
          "one of " + list};
}

}  // namespace check

}  // namespace kvb
