// kvbench reproduce NAME: runs a named reproduction of a paper's table (a miniature on the tiny
// models and synthetic tasks, or with --model/--data the real one) and prints paper | ours |
// difference and which of the paper's claims hold in our run.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "engine/common/error.h"
#include "engine/common/files.h"
#include "engine/common/shared_folder.h"
#include "harness/runner/runner.h"
#include "harness/runner/stop_signals.h"
#include "reports/reproduce.h"

namespace kvb {
namespace {

// The miniatures name their model (kvbench-tiny-v2); ${MODEL} in one would mean this one.
const char* const kMiniatureModel = "kvbench-tiny-v2";

}  // namespace

void add_reproduce_command(CLI::App& app, std::vector<Command>& out, const std::string& command_line) {
  struct Options {
    std::string name, model, data, db, out, cache_dir, shared = shared_folder();
    int threads = 0;
    bool list = false, context_sharing = false, redo_changed_models = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "reproduce", "Reproduce a paper's table: run its suite, print paper | ours | difference "
                   "and which of the paper's claims hold");
  cmd->add_option("name", o->name, "Reproduction (see --list)");
  cmd->add_flag("--list", o->list, "List the reproductions");
  cmd->add_option("--model", o->model, "The paper-scale run on this Hugging Face checkpoint "
                                       "(default: the documented miniature on a tiny model)");
  cmd->add_option("--data", o->data, "Folder of LongBench <dataset>.jsonl files (with --model)");
  cmd->add_option("--db", o->db, "Results database (default: results/runs/<suite>.db)");
  add_run_cache_dir_option(cmd, o->cache_dir);
  cmd->add_option("--out", o->out, "Also write the comparison (Markdown) to this file");
  cmd->add_option("--shared", o->shared, "The shared folder (haystack, word lists; default: $KVBENCH_SHARED, else "
                  "../shared beside the checkout)")
      ->capture_default_str();
  cmd->add_flag("--context-sharing", o->context_sharing,
                "Also run every cell with its context compressed before the question "
                "(context_sharing per_sample) and show each method's drop after the comparison");
  cmd->add_option("--threads", o->threads, "Intra-op CPU threads (default: all cores)")
      ->check(thread_count());
  cmd->add_flag("--redo-changed-models", o->redo_changed_models,
                "Redo the cells whose stored results ran another model under the name the "
                "reproduction gives it, forgetting those results (else such a run is refused)");
  out.push_back({cmd, [o, command_line] {
    if (o->list || o->name.empty()) {
      for (const std::string& n : reproduction_names())
        std::cout << n << "  " << load_reproduction(n).title << "\n";
      if (o->list) return 0;
      std::cerr << "kvbench: error: reproduce: missing NAME (one of those listed above)\n";
      return 2;
    }
    const Reproduction r = load_reproduction(o->name);
    const bool real = !o->model.empty();
    if (!real && !o->data.empty())
      throw InputError("--data: the LongBench files of the paper's setting, which runs with "
                       "--model (the miniature reads none)");
    if (!o->out.empty()) {  // before the run, not after it
      const std::filesystem::path folder =
          std::filesystem::absolute(o->out).parent_path();
      if (!std::filesystem::is_directory(folder))
        throw InputError("--out " + o->out + ": no folder " + folder.string());
      if (std::filesystem::is_directory(o->out) || o->out.back() == '/')
        throw InputError("--out " + o->out + ": a folder, not the file to write");
    }
    if (real && !r.real)
      throw InputError("reproduce " + o->name + ": has no paper-scale setting, only the miniature "
                       "(run it without --model)");
    const ReproductionMode& mode = real ? *r.real : r.miniature;
    if (real && o->data.empty() && mode.suite.dump().find("${DATA}") != std::string::npos)
      throw InputError("reproduce " + o->name + ": --data DIR (the LongBench files) is required "
                       "with --model");
    const std::string suite_name = "repro_" + r.name + (real ? "" : "_mini");
    const json suite_json = reproduction_suite(
        r, mode, {real ? o->model : kMiniatureModel, o->data, o->shared}, suite_name);
    const std::string sharing = "context_sharing=none,per_sample";
    Suite suite;
    try {
      suite = parse_suite(suite_json, "reproduction " + r.name,
                          o->context_sharing ? std::vector<std::string>{sharing}
                                             : std::vector<std::string>{});
    } catch (const InputError& e) {  // name our flag, not the --set it stands for
      const std::string message = e.what(), set = "--set " + sharing;
      if (message.rfind(set, 0) != 0) throw;
      throw InputError("--context-sharing" + message.substr(set.size()));
    }
    RunOptions options;
    options.db_path = o->db.empty() ? default_db_path(suite_name) : o->db;
    options.cache_dir = run_cache_dir(o->cache_dir, options.db_path);
    options.threads = configure_threads(o->threads);
    options.command = command_line;
    options.redo_changed_models = o->redo_changed_models;
    options.progress = isatty(STDERR_FILENO) ? Progress::Style::live : Progress::Style::lines;
    options.header = "reproduce " + r.name + ": " + std::to_string(suite.cells().size()) +
                     " cells -> " + options.db_path;
    const RunSummary summary = run_suite(suite, options, std::cerr);
    if (summary.stopped_by) finish_stopped(summary.stopped_by);  // no comparison of a part
    ResultStore store(options.db_path);
    const std::string md =
        compare_with_paper(r, mode, load_report_data(store, summary.run_id, options.db_path));
    std::cout << md;
    if (!o->out.empty()) write_file_atomically(o->out, md);
    return summary.failed > 0 ? 1 : 0;
  }});
}

}  // namespace kvb
