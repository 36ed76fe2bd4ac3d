// libFuzzer entry for one line of a LongBench .jsonl file: parse_longbench_line must return or
// throw kvb::InputError; a record it accepts is formatted into every dataset's prompt and
// scored with every dataset's metric (its input as the prediction, its answers and classes as
// the references), each in [0, 1]. A crash, a sanitizer report, another exception type or a
// score outside [0, 1] is a finding. Run with ci/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "datasets/longbench/longbench.h"
#include "datasets/metrics/longbench_metrics.h"
#include "engine/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  kvb::LongBenchRecord record;
  try {
    record = kvb::parse_longbench_line(line, "fuzz.jsonl:1", 1);
  } catch (const kvb::InputError&) {
    return 0;
  }
  for (const std::string& dataset : kvb::longbench_datasets()) {
    kvb::longbench_format(kvb::longbench_task(dataset).prompt, record.context, record.input);
    if (kvb::longbench_needs_jieba(dataset)) continue;  // needs a dictionary file; jieba has its own tests
    try {
      const double score = kvb::longbench_record_score(dataset, record.input, record.answers,
                                                       record.all_classes);
      if (!(score >= 0 && score <= 1)) std::abort();
    } catch (const kvb::InputError&) {
    }
  }
  return 0;
}
