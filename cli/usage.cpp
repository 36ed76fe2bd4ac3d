#include "cli/usage.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <thread>

namespace kvb {
namespace {

std::string joined(const std::vector<std::string>& names, const std::string& separator) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options())
    for (const std::string& l : opt->get_lnames()) names.push_back("--" + l);
  return names;
}

// The subcommand the command line selected, or `app` itself.
const CLI::App& selected(const CLI::App& app) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  return parsed.empty() ? app : *parsed.back();
}

std::string help_hint(const CLI::App& app, const CLI::App& command) {
  return &command == &app ? "; kvbench --help says what each command does"
                          : "; see kvbench " + command.get_name() + " --help";
}

std::string missing_required(const CLI::App& command) {
  std::vector<std::string> missing;
  for (const CLI::Option* opt : command.get_options()) {
    if (!opt->get_required() || opt->count() > 0) continue;
    std::string name = opt->get_name();
    if (!opt->nonpositional())
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
    missing.push_back(name + " (" + opt->get_description() + ")");
  }
  return missing.empty() ? "" : "missing " + joined(missing, ", ");
}

std::string unexpected_arguments(const CLI::App& command) {
  std::vector<std::string> parts;
  for (const std::string& extra : command.remaining()) {
    if (extra.rfind("-", 0) == 0)
      parts.push_back("unknown option " + extra + did_you_mean(extra, option_names(command)));
    else
      parts.push_back("unexpected argument \"" + extra + "\"");
  }
  return joined(parts, "; ");
}

// "--db: 1 required TEXT missing" -> "--db needs a value".
std::string mismatch(const std::string& what) {
  const size_t colon = what.find(':');
  if (what.rfind("-", 0) == 0 && colon != std::string::npos &&
      what.find("required", colon) != std::string::npos)
    return what.substr(0, colon) + " needs a value";
  return what;
}

std::string describe(const CLI::App& app, const CLI::App& command, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::RequiredError*>(&e)) {
    if (&command == &app) return "no command given; commands: " + joined(subcommand_names(app), ", ");
    const std::string missing = missing_required(command);
    if (!missing.empty()) return missing;
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    const std::string extras = unexpected_arguments(command);
    if (!extras.empty()) return extras;
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) return mismatch(e.what());
  return e.what();
}

}  // namespace

std::string unknown_command_message(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args[0].rfind("-", 0) == 0) return "";
  const std::vector<std::string> names = subcommand_names(app);
  if (std::find(names.begin(), names.end(), args[0]) != names.end()) return "";
  return "unknown command \"" + args[0] + "\"" + did_you_mean(args[0], names) +
         "; commands: " + joined(names, ", ") + help_hint(app, app);
}

std::string usage_error_message(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::App& command = selected(app);
  const std::string where = &command == &app ? "" : command.get_name() + ": ";
  return where + describe(app, command, e) + help_hint(app, command);
}

CLI::Validator non_negative(const std::string& zero_means) {
  return CLI::Validator(
      [zero_means](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') return "\"" + text + "\" is not a number";
        if (value >= 0) return "";
        return text + " is negative; expected 0 or more" +
               (zero_means.empty() ? "" : " (0: " + zero_means + ")");
      },
      "NONNEGATIVE");
}

int machine_cores() { return int(std::max(1u, std::thread::hardware_concurrency())); }

CLI::Validator thread_count() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (std::string bad = non_negative("all cores")(text); !bad.empty()) return bad;
        const int cores = machine_cores();
        // Far beyond the cores a pool only waits and switches (100000 took minutes to start).
        const int most = std::max(256, 4 * cores);
        if (std::strtod(text.c_str(), nullptr) <= most) return "";
        return text + " is more than " + std::to_string(most) + " threads (this machine has " +
               std::to_string(cores) + " cores)";
      },
      "THREADS");
}

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') return "\"" + text + "\" is not a number";
        return value > 0 ? "" : text + " is not positive; expected a number > 0";
      },
      "POSITIVE");
}

CLI::Validator one_of(const std::vector<std::string>& values) {
  return CLI::Validator(
      [values](std::string& text) -> std::string {
        if (std::find(values.begin(), values.end(), text) != values.end()) return "";
        return "\"" + text + "\" is not one of " + joined(values, ", ") + did_you_mean(text, values);
      },
      "{" + joined(values, ",") + "}");
}

}  // namespace kvb
