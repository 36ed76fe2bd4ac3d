// Numbers as text for tables and reports.
#pragma once
#include <string>

namespace kvb {

// `v` with `decimals` digits after the point ("%.*f"), never "-0.0" for a zero.
std::string fixed(double v, int decimals);

}  // namespace kvb
