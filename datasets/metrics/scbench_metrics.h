// SCBench's string-comparison scores (microsoft/MInference scbench/compute_scores.py), per
// answer, in [0, 100]; a task's score is the mean over its answers.
#pragma once
#include <string>
#include <vector>

namespace kvb {

// retr.kv and prefix-suffix: 100 when `label` occurs in `prediction` as it is (case-sensitive,
// nothing stripped), else 0.
double scbench_contains_score(const std::string& prediction, const std::string& label);

// multi-hop variable tracking: the share of `references` found in `prediction`
// case-insensitively, rounded to 2 decimals (as the reference does) and x100.
double scbench_vt_score(const std::string& prediction, const std::vector<std::string>& references);

// En.QA: 100 when any reference, upper-cased, occurs in the stripped, upper-cased prediction.
// Upper-casing is ASCII's (Python's str.upper also maps other letters).
double scbench_qa_score(const std::string& prediction, const std::vector<std::string>& references);

// En.MultiChoice: the reference's rules over a stripped prediction and `label` = {the right
// option's text, its letter}: a first character A-D decides alone; an exact label scores;
// after punctuation becomes spaces, the text after the first of "answer is:", "answer:",
// "answer is", "option is" must start with a label; else the first word that is a substring
// of "ABCD" must be a label.
double scbench_choice_score(const std::string& prediction, const std::vector<std::string>& label);

}  // namespace kvb
