// The progress display: a line per finished cell, and a worker's event lines shown by its
// supervisor as one display (kvbench run --workers).
#include "harness/runner/progress.h"

#include <gtest/gtest.h>

#include <sstream>

namespace kvb {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(Progress, ALinePerFinishedCellCountedOnce) {
  std::ostringstream out;
  Progress p(out, 3, Progress::Style::lines);
  p.cell_skipped(0, "a");
  p.cell_skipped(0, "a");  // a second report of the same complete cell
  p.cell_started(1, "b");
  p.sample_done(1, 1, 2);
  p.cell_finished(1, "complete", 1.0);
  p.cell_elsewhere(2, "c", "running in h pid 7");
  const auto l = lines_of(out.str());
  ASSERT_EQ(l.size(), 3u) << out.str();
  EXPECT_EQ(l[0].rfind("[1/3 00:00]", 0), 0u) << l[0];
  EXPECT_NE(l[0].find("a: already complete, skipped"), std::string::npos) << l[0];
  EXPECT_EQ(l[1].rfind("[2/3 ", 0), 0u) << l[1];
  EXPECT_NE(l[1].find("b: complete in 00:01"), std::string::npos) << l[1];
  EXPECT_NE(l[2].find("[3/3 "), std::string::npos) << l[2];
  EXPECT_NE(l[2].find("c: running in h pid 7, skipped"), std::string::npos) << l[2];
}

// Two workers' events through one supervisor display: every cell once, the failures' text
// kept on one line, a worker's "elsewhere" (its sibling runs the cell) not counted.
TEST(Progress, WorkersEventsMakeOneDisplay) {
  std::ostringstream worker0, worker1, shown;
  Progress w0(worker0, 3, Progress::Style::events), w1(worker1, 3, Progress::Style::events);
  w0.cell_skipped(0, "a");
  w1.cell_skipped(0, "a");
  w0.cell_started(1, "b");
  w1.cell_elsewhere(1, "b", "running in h pid 1");
  w1.cell_started(2, "c");
  w1.sample_done(2, 1, 1);
  w1.cell_finished(2, "FAILED: out of memory\nwhile allocating", 2.0);
  w0.cell_finished(1, "complete", 1.0);
  EXPECT_TRUE(shown.str().empty());

  Progress display(shown, 3, Progress::Style::lines, 2);
  for (const std::string& text : {worker0.str(), worker1.str()})
    for (const std::string& line : lines_of(text)) EXPECT_TRUE(display.apply_event(line)) << line;
  EXPECT_FALSE(display.apply_event("warning: config.json: unknown key"));
  const auto l = lines_of(shown.str());
  ASSERT_EQ(l.size(), 3u) << shown.str();
  EXPECT_NE(l[0].find("a: already complete"), std::string::npos) << l[0];
  EXPECT_EQ(l[1].rfind("[2/3 ", 0), 0u) << l[1];  // worker 0's lines were applied first
  EXPECT_NE(l[1].find("b: complete in 00:01"), std::string::npos) << l[1];
  EXPECT_EQ(l[2].rfind("[3/3 ", 0), 0u) << l[2];
  EXPECT_NE(l[2].find("c: FAILED: out of memory while allocating in 00:02"), std::string::npos)
      << l[2];
}

}  // namespace
}  // namespace kvb
