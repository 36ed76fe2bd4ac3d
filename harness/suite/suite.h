// Experiment suites: a named JSON file whose axes (models x datasets x methods x budgets x seeds)
// expand into cells. Validated completely before anything runs.
#pragma once
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kvb {

using json = nlohmann::json;

struct DatasetSpec {
  std::string name;
  json params;       // normalised: every default filled in
  int revision = 0;  // DatasetInfo::revision of the params, in the cell's config from 1 on
};

struct MethodSpec {
  std::string name;
  std::string label;  // distinguishes two configs of one method; defaults to the name
  json config;        // normalised
};

struct Cell {
  std::string model;
  std::string device = "cpu";  // cpu, cuda, cuda:N
  std::string dtype = "f32";   // f32, bf16, f16
  DatasetSpec dataset;
  MethodSpec method;
  std::optional<int64_t> budget;  // none for methods that take no budget (Full)
  uint64_t seed = 0;
  int max_new_tokens = 0;  // 0: the dataset's own
  bool recall = false;     // measure recall of the true top-B keys and attention-output error
  // "none": each sample's whole prompt is prefilled (and compressed) with its question in it;
  // "per_sample": its context alone is, then each question is read after it (kContextSharing).
  std::string context_sharing = "none";

  // The normalised config: what identifies the cell in the store. Device, dtype and
  // context_sharing appear only when not cpu / f32 / none, so results stored before they were
  // axes keep their identity.
  json to_json() const;
  std::string key() const { return to_json().dump(); }
  std::string budget_text() const { return budget ? std::to_string(*budget) : "-"; }
  // "SnapKV @ 128 on passkey (kvbench-tiny, cuda, bf16, seed 0)" (device, dtype and
  // context_sharing where not the default): progress lines, reports.
  std::string description() const;
};

// " (cuda:0, bf16)" for a stored cell config that names a device or dtype, "" for cpu/f32:
// what tables add to the model's name so that runs on different devices are never averaged.
std::string device_suffix(const json& cell_config);
// " (shared context)" for a stored cell config with context_sharing "per_sample", else "": what
// tables add to the dataset's name.
std::string sharing_suffix(const json& cell_config);

struct Suite {
  std::string name;
  std::string description;
  std::string path;  // the file it was read from
  std::vector<std::string> models;
  std::vector<std::string> devices = {"cpu"};
  std::vector<std::string> dtypes = {"f32"};
  std::vector<std::string> context_sharing = {"none"};
  std::vector<DatasetSpec> datasets;
  std::vector<MethodSpec> methods;
  std::vector<int64_t> budgets;
  std::vector<uint64_t> seeds;
  int max_new_tokens = 0;
  bool recall = false;
  json source;  // the file's JSON after overrides, stored with each run

  // Cartesian product of the axes; budget-less methods get one cell per budget-less combination.
  std::vector<Cell> cells() const;
};

// The values of the context_sharing axis.
inline const std::vector<std::string> kContextSharing = {"none", "per_sample"};

// Finds a suite by name in suites/ (or takes an existing file path).
std::string resolve_suite_path(const std::string& name_or_path);
std::vector<std::string> builtin_suite_names();
// Reads, applies `overrides` ("key=v1,v2"), validates. InputError names file, JSON path, expectation.
Suite load_suite(const std::string& name_or_path, const std::vector<std::string>& overrides = {});
Suite parse_suite(const json& j, const std::string& path, const std::vector<std::string>& overrides = {});
// A suite stored with a run (runs.suite_json): as parse_suite, but its name and an axis listing
// a value twice are taken as the kvbench that ran it took them (rules added since).
Suite parse_stored_suite(const json& j, const std::string& path);

}  // namespace kvb
