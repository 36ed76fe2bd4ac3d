// kvbench score --dataset NAME FILE.jsonl: LongBench's eval.py on one pred/ file (one
// {"pred", "answers", "all_classes", "length"} object a line): prints the dataset's score.
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "datasets/longbench/longbench.h"
#include "datasets/metrics/longbench_metrics.h"
#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/json_fields.h"

namespace kvb {
namespace {

struct Prediction {
  std::string pred;
  std::vector<std::string> answers, all_classes;
};

Prediction parse_prediction(const std::string& line, const std::string& where) {
  json j = parse_json_object(line, where);
  Prediction p;
  if (!j.contains("pred") || !j["pred"].is_string())
    throw InputError(where + ": missing string field \"pred\"");
  p.pred = j["pred"].get<std::string>();
  if (!j.contains("answers")) throw InputError(where + ": missing field \"answers\"");
  p.answers = longbench_strings(j["answers"], where + ".answers");
  if (j.contains("all_classes") && !j["all_classes"].is_null())
    p.all_classes = longbench_strings(j["all_classes"], where + ".all_classes");
  return p;
}

int score_file(const std::string& dataset, const std::string& path, const std::string& jieba_dict) {
  const auto& names = longbench_datasets();
  if (std::find(names.begin(), names.end(), dataset) == names.end())
    throw InputError("score: --dataset: unknown LongBench dataset \"" + dataset + "\"");
  if (longbench_needs_jieba(dataset)) {
    try {
      jieba_segmenter(jieba_dict);  // loaded once, before any line: a missing one fails fast
    } catch (const InputError& e) {
      throw InputError("score: --jieba-dict: " + std::string(e.what()));
    }
  }
  std::ifstream in(path);
  if (!in) throw InputError(path + ": no such file");
  double total = 0;
  size_t count = 0;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Prediction p = parse_prediction(line, path + ":" + std::to_string(number));
    total += longbench_record_score(dataset, p.pred, p.answers, p.all_classes, jieba_dict);
    ++count;
  }
  if (count == 0) throw InputError(path + ": holds no predictions");
  std::cout << dataset << " " << std::fixed << std::setprecision(2)
            << longbench_dataset_score(total, count) << " (" << longbench_metric_name(dataset)
            << ", " << count << " records)\n";
  return 0;
}

}  // namespace

void add_score_command(CLI::App& app, std::vector<Command>& out) {
  struct Options {
    std::string dataset, file, jieba_dict;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "score", "Score a LongBench pred/ file (one {\"pred\", \"answers\", \"all_classes\", "
               "\"length\"} a line) as LongBench's eval.py does");
  cmd->add_option("--dataset", o->dataset, "LongBench dataset name (e.g. hotpotqa)")->required();
  cmd->add_option("file", o->file, "Predictions .jsonl")->required();
  cmd->add_option("--jieba-dict", o->jieba_dict,
                  "jieba's dict.txt for multifieldqa_zh, dureader and vcsum (default: Debian's "
                  "python3-jieba, " + std::string(kDebianJiebaDict) + ")");
  out.push_back({cmd, [o] { return score_file(o->dataset, o->file, o->jieba_dict); }});
}

}  // namespace kvb
