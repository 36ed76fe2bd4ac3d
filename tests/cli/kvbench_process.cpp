#include "tests/cli/kvbench_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace kvb::test {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

pid_t spawn(const std::vector<std::string>& args, const std::string& cwd,
            const std::string& tag, const std::vector<std::string>& launcher) {
  std::vector<std::string> all = launcher;
  all.push_back(KVBENCH_BINARY);
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = cwd + "/" + tag + ".stdout", err = cwd + "/" + tag + ".stderr";
  const pid_t pid = fork();
  if (pid == 0) {  // only async-signal-safe calls until exec
    setpgid(0, 0);  // a group of its own, which a test may signal whole (kill(-pid, ...))
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || chdir(cwd.c_str()) != 0) _exit(120);
    const int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, 0);
    execv(argv[0], argv.data());
    _exit(121);
  }
  return pid;
}

Output wait_for(pid_t pid, const std::string& cwd, const std::string& tag) {
  Output r;
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(cwd + "/" + tag + ".stdout");
  r.err = read_file(cwd + "/" + tag + ".stderr");
  return r;
}

Output kvbench(const std::vector<std::string>& args, const std::string& cwd) {
  return wait_for(spawn(args, cwd), cwd);
}

std::vector<Output> kvbench_all(const std::vector<std::vector<std::string>>& invocations,
                                const std::string& cwd) {
  std::vector<pid_t> pids;
  for (size_t i = 0; i < invocations.size(); ++i)
    pids.push_back(spawn(invocations[i], cwd, "job" + std::to_string(i)));
  std::vector<Output> outputs;
  for (size_t i = 0; i < pids.size(); ++i)
    outputs.push_back(wait_for(pids[i], cwd, "job" + std::to_string(i)));
  return outputs;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

size_t lines(const std::string& text) {
  return size_t(std::count(text.begin(), text.end(), '\n'));
}

size_t lines_with(const std::string& text, const std::string& part) {
  size_t n = 0;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) n += contains(line, part);
  return n;
}

std::string describe(const Output& r) {
  return "exit " + std::to_string(r.code) + "\n--- stdout:\n" + r.out + "\n--- stderr:\n" + r.err;
}

std::string write_suite(const TempDir& dir, const std::string& name, const nlohmann::json& j) {
  const std::string path = dir.file(name);
  std::ofstream(path) << j.dump(2);
  return path;
}

std::vector<std::vector<std::string>> sql_rows(const std::string& db, const std::string& query) {
  sqlite3* handle = nullptr;
  EXPECT_EQ(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK) << db;
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(handle, query.c_str(), -1, &stmt, nullptr), SQLITE_OK) << query;
  std::vector<std::vector<std::string>> rows;
  while (stmt && sqlite3_step(stmt) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      const unsigned char* text = sqlite3_column_text(stmt, c);
      row.push_back(text ? reinterpret_cast<const char*>(text) : "");
    }
    rows.push_back(std::move(row));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return rows;
}

}  // namespace kvb::test
