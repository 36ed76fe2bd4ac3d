// Python's str.lower() and \d as the LongBench metrics need them; every expected value is what
// Python 3.11.2 (Debian 12's /usr/bin/python3) printed for the same input.
#include "datasets/metrics/py_unicode.h"

#include <gtest/gtest.h>

namespace kvb {
namespace {

TEST(PyLower, CapitalSigmaIsFinalAfterACasedLetterAndNotBeforeOne) {
  EXPECT_EQ(py_lower(U"\u039f\u0394\u039f\u03a3"), U"\u03bf\u03b4\u03bf\u03c2");  // ΟΔΟΣ
  EXPECT_EQ(py_lower(U"\u03a3\u0391"), U"\u03c3\u03b1");                          // ΣΑ
  EXPECT_EQ(py_lower(U"\u03a3"), U"\u03c3");                                      // alone
  EXPECT_EQ(py_lower(U"\u0391\u03a3\u0391"), U"\u03b1\u03c3\u03b1");              // inside
  EXPECT_EQ(py_lower(U"\u039f \u0398\u0395\u039f\u03a3 \u0395"),
            U"\u03bf \u03b8\u03b5\u03bf\u03c2 \u03b5");  // a space is not case-ignorable
}

TEST(PyLower, CaseIgnorablesAreSkippedOnBothSides) {
  EXPECT_EQ(py_lower(U"\u0391.\u03a3."), U"\u03b1.\u03c2.");          // Α.Σ. -> α.ς.
  EXPECT_EQ(py_lower(U"\u0391\u02b0\u03a3"), U"\u03b1\u02b0\u03c2");  // a modifier letter
  EXPECT_EQ(py_lower(U"\u02b0\u03a3"), U"\u02b0\u03c3");              // nothing cased before
  EXPECT_EQ(py_lower(U"\u0391\u03a3\u0301\u0391"), U"\u03b1\u03c3\u0301\u03b1");  // accent
  EXPECT_EQ(py_lower(U"\u0391\u03a3\u02b0"), U"\u03b1\u03c2\u02b0");
}

TEST(PyLower, OtherCodePointsAsAlone) {
  EXPECT_EQ(py_lower(U"\u0130x"), U"i\u0307x");  // İ lowers to two code points
  EXPECT_EQ(py_lower(U"\u00c5B1"), U"\u00e5b1");
}

TEST(PyIsDecimal, EveryNdDigitAndNothingElse) {
  for (char32_t c : {U'0', U'9', U'\u0663', U'\u0967', U'\uff10', U'\U0001d7ce'})
    EXPECT_TRUE(py_is_decimal(c)) << uint32_t(c);
  // Superscripts and circled digits are digits to str.isdigit() but not \d; nor are numerals.
  for (char32_t c : {U'a', U'/', U':', U'\u00b2', U'\u2460', U'\u2167', U'\u4e09'})
    EXPECT_FALSE(py_is_decimal(c)) << uint32_t(c);
}

}  // namespace
}  // namespace kvb
