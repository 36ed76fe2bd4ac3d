// kvbench: one binary, one subcommand per job. Exit codes: 0 ok, 1 failures recorded,
// 2 usage or input error.
#include <ATen/Parallel.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <thread>

#include "harness/cli/commands.h"
#include "harness/common/error.h"

int main(int argc, char** argv) {
  CLI::App app{"kvbench: compare LLM KV-cache compression methods on one engine, one budget"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show the help of every subcommand");
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  kvb::register_commands(app, command_line);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    return kvb::run_selected_command(app);
  } catch (const kvb::InputError& e) {
    std::cerr << "kvbench: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kvbench: internal error: " << e.what() << "\n";
    return 3;
  }
}
