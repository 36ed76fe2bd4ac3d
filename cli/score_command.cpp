// kvbench score --dataset NAME FILE.jsonl [--e]: LongBench's eval.py on one pred/ (or, --e,
// pred_e/) file (one {"pred", "answers", "all_classes", "length"} object a line): prints the
// dataset's score (--e: the score of each length range).
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>

#include "datasets/longbench/longbench.h"
#include "datasets/metrics/longbench_metrics.h"
#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/format.h"
#include "engine/common/json_fields.h"

namespace kvb {
namespace {

struct Prediction {
  std::string pred;
  std::vector<std::string> answers, all_classes;
  std::optional<double> length;
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
  if (j.contains("length") && j["length"].is_number()) p.length = j["length"].get<double>();
  return p;
}

void check_dataset(const std::string& dataset, bool e, const std::string& jieba_dict) {
  const auto& names = e ? longbench_e_datasets() : longbench_datasets();
  if (std::find(names.begin(), names.end(), dataset) == names.end()) {
    if (!e && !longbench_task_of(dataset).empty())  // qasper_e: eval.py names the file qasper
      throw InputError("score: --dataset: " + dataset + " is LongBench-E's; score its pred_e/ "
                       "file with --dataset " + longbench_task_of(dataset) + " --e");
    throw InputError("score: --dataset: unknown " + std::string(e ? "LongBench-E" : "LongBench") +
                     " dataset \"" + dataset + "\" (known: " + join(names, ", ") + ")");
  }
  if (longbench_needs_jieba(dataset)) {
    try {
      jieba_segmenter(jieba_dict);  // loaded once, before any line: a missing one fails fast
    } catch (const InputError& e) {
      throw InputError("score: --jieba-dict: " + std::string(e.what()));
    }
  }
}

std::vector<Prediction> read_predictions(const std::string& path, bool need_length) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": no such file");
  std::vector<Prediction> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(number);
    out.push_back(parse_prediction(line, where));
    if (need_length && !out.back().length)  // eval.py would zip the scores with fewer lengths
      throw InputError(where + ": missing numeric field \"length\" (--e scores by it)");
  }
  if (out.empty()) throw InputError(path + ": holds no predictions");
  return out;
}

// eval.py scores every record with the last line's all_classes (it overwrites the variable at
// each line and passes it once).
int score_file(const std::string& dataset, const std::string& path, const std::string& jieba_dict,
               bool e) {
  check_dataset(dataset, e, jieba_dict);
  const std::vector<Prediction> predictions = read_predictions(path, e);
  const std::vector<std::string>& all_classes = predictions.back().all_classes;
  std::vector<double> scores, lengths;
  for (const Prediction& p : predictions) {
    scores.push_back(longbench_record_score(dataset, p.pred, p.answers, all_classes, jieba_dict));
    if (e) lengths.push_back(*p.length);
  }
  std::cout << dataset << " " << std::fixed << std::setprecision(2);
  if (e) {
    for (const LengthRangeScore& r : longbench_e_scores(lengths, scores)) {
      std::cout << r.range << " ";
      if (r.records == 0)
        std::cout << "nan (no records), ";  // eval.py: the mean of an empty list
      else
        std::cout << r.score << " (" << r.records << " records), ";
    }
    std::cout << "LongBench-E, ";
  } else {
    double total = 0;
    for (const double score : scores) total += score;
    std::cout << longbench_dataset_score(total, predictions.size()) << " (";
  }
  std::cout << longbench_metric_name(dataset) << ", " << predictions.size() << " records"
            << (e ? "" : ")") << "\n";
  return 0;
}

}  // namespace

void add_score_command(CLI::App& app, std::vector<Command>& out) {
  struct Options {
    std::string dataset, file, jieba_dict;
    bool e = false;
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
  cmd->add_flag("--e", o->e,
                "LongBench-E (a pred_e/ file, named by its task: --dataset qasper): the score of "
                "each length range, 0-4k, 4-8k and 8k+ of the records' \"length\", as eval.py --e");
  out.push_back({cmd, [o] { return score_file(o->dataset, o->file, o->jieba_dict, o->e); }});
}

}  // namespace kvb
