#!/usr/bin/env python3
"""Writes nfc_tables.cpp: the Unicode data that nfc.cpp's NFC normalisation needs, read from the
Unicode Character Database files (not from Python's unicodedata, whose Unicode version follows
the Python build):
  - canonical combining classes (ranges of equal non-zero class),
  - single-step canonical decompositions (nfc.cpp recurses; Hangul syllables are algorithmic),
  - canonical composition pairs, without the full composition exclusions (CompositionExclusions.txt,
    singletons, non-starter decompositions).

Usage: python3 gen_nfc_tables.py [UCD_DIR] > nfc_tables.cpp
UCD_DIR holds UnicodeData.txt and CompositionExclusions.txt; default /usr/share/unicode
(Debian package unicode-data). If DerivedNormalizationProps.txt is there too, the derived
exclusions are checked against its Full_Composition_Exclusion property.
"""
import os
import re
import sys

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


def read_unicode_data(path):
    """Returns ({cp: ccc} for ccc != 0, {cp: [canonical decomposition]})."""
    ccc, decomposition = {}, {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) < 6:
                continue
            cp = int(fields[0], 16)
            # Ranges (<CJK Ideograph, First> .. Last>, Hangul syllables, ...) all have class 0
            # and no decomposition mapping in the file.
            if fields[3] != "0":
                ccc[cp] = int(fields[3])
            mapping = fields[5]
            if mapping and not mapping.startswith("<"):  # <tag> marks compatibility mappings
                decomposition[cp] = [int(x, 16) for x in mapping.split()]
    return ccc, decomposition


def read_code_points(path):
    """The code points of the uncommented lines of a UCD file, ranges expanded."""
    out = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            data = line.split("#", 1)[0].split(";", 1)[0].strip()
            if not data:
                continue
            first, _, last = data.partition("..")
            out.update(range(int(first, 16), int(last or first, 16) + 1))
    return out


def read_version(path):
    with open(path, encoding="utf-8") as f:
        match = re.match(r"#\s*CompositionExclusions-([0-9.]+)\.txt", f.readline())
    if not match:
        sys.exit(f"{path}: first line does not name the Unicode version")
    return match.group(1)


def derived_full_exclusions(path):
    """Full_Composition_Exclusion from DerivedNormalizationProps.txt, or None if absent."""
    if not os.path.exists(path):
        return None
    out = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            data = line.split("#", 1)[0].split(";")
            if len(data) >= 2 and data[1].strip() == "Full_Composition_Exclusion":
                first, _, last = data[0].strip().partition("..")
                out.update(range(int(first, 16), int(last or first, 16) + 1))
    return out


def class_ranges(ccc):
    """[(first, last, class)] over maximal runs of consecutive code points with one class."""
    out = []
    for cp in sorted(ccc):
        if out and out[-1][1] == cp - 1 and out[-1][2] == ccc[cp]:
            out[-1] = (out[-1][0], cp, ccc[cp])
        else:
            out.append((cp, cp, ccc[cp]))
    return out


def emit(declaration, rows, decimal_last=False):
    """A C++ array definition, as many rows a line as fit in 100 columns; code points in hex
    (0 as 0, classes in decimal)."""
    def cell(row):
        values = [f"0x{v:X}" if v else "0" for v in row]
        if decimal_last:
            values[-1] = str(row[-1])
        return "{" + ", ".join(values) + "}"

    lines, line = [f"const {declaration}[] = {{"], "   "
    for row in rows:
        text = f" {cell(row)},"
        if len(line) + len(text) > 100:
            lines.append(line)
            line = "   "
        line += text
    lines.append(line)
    lines.append("};")
    return "\n".join(lines)


def main():
    ucd = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
    unicode_data = os.path.join(ucd, "UnicodeData.txt")
    exclusions_file = os.path.join(ucd, "CompositionExclusions.txt")
    version = read_version(exclusions_file)
    ccc, decomposition = read_unicode_data(unicode_data)
    assert not any(HANGUL_FIRST <= cp <= HANGUL_LAST for cp in decomposition)

    excluded = read_code_points(exclusions_file)
    full_exclusions = set(excluded)
    for cp, d in decomposition.items():
        if len(d) == 1 or ccc.get(cp, 0) != 0 or ccc.get(d[0], 0) != 0:
            full_exclusions.add(cp)  # singleton or non-starter decomposition
    derived = derived_full_exclusions(os.path.join(ucd, "DerivedNormalizationProps.txt"))
    if derived is not None and derived != full_exclusions:
        sys.exit("Full_Composition_Exclusion differs from DerivedNormalizationProps.txt")

    compositions = sorted((d[0], d[1], cp) for cp, d in decomposition.items()
                          if cp not in full_exclusions)
    assert all(len(decomposition[c]) == 2 for _, _, c in compositions)
    # nfc.cpp's fast path returns text whose code points are all below U+0300 unchanged: nothing
    # there decomposes in NFC, is a non-starter, or is the second half of a composition.
    assert min(ccc) >= 0x300 and min(b for _, b, _ in compositions) >= 0x300
    assert all(cp >= 0x300 for cp in full_exclusions)

    decompositions = sorted((cp, d[0], d[1] if len(d) > 1 else 0)
                            for cp, d in decomposition.items())
    sys.stdout.write(f"""\
// GENERATED by gen_nfc_tables.py from Unicode {version} (the version CompositionExclusions.txt
// names; Python's unicodedata is not used), reading
//   {unicode_data}
//   {exclusions_file}
// Do not edit by hand: rerun `python3 gen_nfc_tables.py > nfc_tables.cpp`.
#include "engine/tokenizer/nfc.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace kvb::unicode {{
namespace {{

struct ClassRange {{
  char32_t first, last;
  uint8_t combining_class;
}};

// Single-step canonical decompositions; second == 0 for singletons. Hangul syllables excluded.
struct Decomposition {{
  char32_t code_point, first, second;
}};

// Primary composites by (first, second), full composition exclusions left out.
struct Composition {{
  char32_t first, second, composite;
}};

{emit("ClassRange kClasses", class_ranges(ccc), decimal_last=True)}

{emit("Decomposition kDecompositions", decompositions)}

{emit("Composition kCompositions", compositions)}

}}  // namespace

const char kNfcUnicodeVersion[] = "{version}";

uint8_t combining_class(char32_t cp) {{
  auto it = std::lower_bound(std::begin(kClasses), std::end(kClasses), cp,
                             [](const ClassRange& r, char32_t c) {{ return r.last < c; }});
  return it != std::end(kClasses) && it->first <= cp ? it->combining_class : 0;
}}

bool canonical_decomposition(char32_t cp, char32_t* first, char32_t* second) {{
  auto it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                             [](const Decomposition& d, char32_t c) {{ return d.code_point < c; }});
  if (it == std::end(kDecompositions) || it->code_point != cp) return false;
  *first = it->first;
  *second = it->second;
  return true;
}}

char32_t primary_composite(char32_t first, char32_t second) {{
  auto before = [](const Composition& c, std::pair<char32_t, char32_t> key) {{
    return c.first != key.first ? c.first < key.first : c.second < key.second;
  }};
  auto it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions),
                             std::make_pair(first, second), before);
  return it != std::end(kCompositions) && it->first == first && it->second == second
             ? it->composite
             : 0;
}}

}}  // namespace kvb::unicode
""")


if __name__ == "__main__":
    main()
