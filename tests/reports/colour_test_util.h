// How far apart two colours look: CIEDE2000 in CIELAB (D65), for normal vision and for the
// three dichromacies simulated with Machado, Oliveira & Fernandes (2009) at severity 1.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <string>

namespace kvb::test {

enum class Vision { normal, deuteranopia, protanopia, tritanopia };

using Triple = std::array<double, 3>;

// "#rrggbb" -> linear RGB in [0, 1].
inline Triple linear_rgb(const std::string& hex) {
  Triple out;
  for (int i = 0; i < 3; ++i) {
    const double c = std::stoi(hex.substr(1 + 2 * i, 2), nullptr, 16) / 255.0;
    out[i] = c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
  }
  return out;
}

inline Triple as_seen(const Triple& rgb, Vision vision) {
  static const double kMatrices[3][3][3] = {
      {{0.367322, 0.860646, -0.227968}, {0.280085, 0.672501, 0.047413}, {-0.011820, 0.042940, 0.968881}},
      {{0.152286, 1.052583, -0.204868}, {0.114503, 0.786281, 0.099216}, {-0.003882, -0.048116, 1.051998}},
      {{1.255528, -0.076749, -0.178779}, {-0.078411, 0.930809, 0.147602}, {0.004733, 0.691367, 0.303900}}};
  if (vision == Vision::normal) return rgb;
  const auto& m = kMatrices[int(vision) - 1];
  Triple out;
  for (int i = 0; i < 3; ++i)
    out[i] = std::clamp(m[i][0] * rgb[0] + m[i][1] * rgb[1] + m[i][2] * rgb[2], 0.0, 1.0);
  return out;
}

inline Triple lab(const Triple& rgb) {
  const double x = (0.4124 * rgb[0] + 0.3576 * rgb[1] + 0.1805 * rgb[2]) / 0.95047;
  const double y = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2];
  const double z = (0.0193 * rgb[0] + 0.1192 * rgb[1] + 0.9505 * rgb[2]) / 1.08883;
  auto f = [](double t) { return t > 216.0 / 24389 ? std::cbrt(t) : (24389.0 / 27 * t + 16) / 116; };
  return {116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))};
}

inline double radians(double degrees) { return degrees * M_PI / 180; }

// Sharma, Wu & Dalal's formulation of CIEDE2000.
inline double ciede2000(const Triple& p, const Triple& q) {
  const double c_mean = (std::hypot(p[1], p[2]) + std::hypot(q[1], q[2])) / 2;
  const double g = 0.5 * (1 - std::sqrt(std::pow(c_mean, 7) / (std::pow(c_mean, 7) + std::pow(25.0, 7))));
  const double a1 = (1 + g) * p[1], a2 = (1 + g) * q[1];
  const double c1 = std::hypot(a1, p[2]), c2 = std::hypot(a2, q[2]);
  auto hue = [](double b, double a) {
    const double h = std::atan2(b, a) * 180 / M_PI;
    return h < 0 ? h + 360 : h;
  };
  const double h1 = hue(p[2], a1), h2 = hue(q[2], a2);
  double dh = c1 * c2 == 0 ? 0 : h2 - h1;
  if (dh > 180) dh -= 360;
  if (dh < -180) dh += 360;
  const double dL = q[0] - p[0], dC = c2 - c1, dH = 2 * std::sqrt(c1 * c2) * std::sin(radians(dh / 2));
  const double l_mean = (p[0] + q[0]) / 2, c_bar = (c1 + c2) / 2;
  double h_mean = h1 + h2;
  if (c1 * c2 != 0) h_mean = std::abs(h1 - h2) <= 180 ? h_mean / 2 : (h_mean < 360 ? h_mean + 360 : h_mean - 360) / 2;
  const double t = 1 - 0.17 * std::cos(radians(h_mean - 30)) + 0.24 * std::cos(radians(2 * h_mean)) +
                   0.32 * std::cos(radians(3 * h_mean + 6)) - 0.20 * std::cos(radians(4 * h_mean - 63));
  const double rc = 2 * std::sqrt(std::pow(c_bar, 7) / (std::pow(c_bar, 7) + std::pow(25.0, 7)));
  const double sl = 1 + 0.015 * (l_mean - 50) * (l_mean - 50) / std::sqrt(20 + (l_mean - 50) * (l_mean - 50));
  const double sc = 1 + 0.045 * c_bar, sh = 1 + 0.015 * c_bar * t;
  const double rt = -std::sin(radians(60 * std::exp(-std::pow((h_mean - 275) / 25, 2)))) * rc;
  return std::sqrt(std::pow(dL / sl, 2) + std::pow(dC / sc, 2) + std::pow(dH / sh, 2) +
                   rt * (dC / sc) * (dH / sh));
}

inline double colour_difference(const std::string& a, const std::string& b, Vision vision) {
  return ciede2000(lab(as_seen(linear_rgb(a), vision)), lab(as_seen(linear_rgb(b), vision)));
}

}  // namespace kvb::test
