// kvbench: one binary, one subcommand per job. Exit codes: 0 ok, 1 failures recorded,
// 2 usage or input error.
#include <ATen/Parallel.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "cli/usage.h"
#include "engine/common/error.h"
#include "engine/common/format.h"
#include "engine/common/heap.h"
#include "engine/common/thread_pools.h"

int main(int argc, char** argv) {
  kvb::use_passive_omp_wait(argv);
  kvb::keep_freed_heap_memory();
  // Past a file-size limit (ulimit -f) a write fails with EFBIG and kvbench names the file,
  // instead of the process being killed by SIGXFSZ halfway through.
  signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"kvbench: compare LLM KV-cache compression methods on one engine, one budget"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show the help of every subcommand");
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + kvb::shell_word(argv[i]);
  kvb::register_commands(app, command_line);
  const std::string unknown_command =
      kvb::unknown_command_message(app, std::vector<std::string>(argv + 1, argv + argc));
  if (!unknown_command.empty()) {  // CLI11 would say "A subcommand is required"
    std::cerr << "kvbench: error: " << unknown_command << "\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "kvbench: error: " << kvb::usage_error_message(app, e) << "\n";
    return 2;
  }
  try {
    return kvb::run_selected_command(app);
  } catch (const kvb::InputError& e) {
    std::cerr << "kvbench: error: " << e.what() << "\n";
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be made or written (a file where a folder is asked for,
    // no permission): input, not a fault of kvbench's. The message names the path.
    const std::string prefix = "filesystem error: ";
    std::string what = e.what();
    if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
    std::cerr << "kvbench: error: " << what << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kvbench: internal error: " << e.what() << "\n";
    return 3;
  }
}
