// The one SQLite statement wrapper of the store (harness/store/ is the only place with SQL).
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#include "harness/store/database_error.h"

namespace kvb {

// Throws for SQLite's last error on `db`: DatabaseError for the file's own failures (a lock
// held too long included: not the cell's fault), std::runtime_error (with `what`, e.g.
// "sqlite step") for the rest (constraints, SQL).
[[noreturn]] inline void throw_sqlite_error(sqlite3* db, const std::string& what) {
  const std::string message = sqlite3_errmsg(db);
  switch (sqlite3_errcode(db) & 0xff) {
    case SQLITE_FULL: case SQLITE_READONLY: case SQLITE_IOERR: case SQLITE_CANTOPEN:
    case SQLITE_CORRUPT: case SQLITE_PERM:
    case SQLITE_BUSY: case SQLITE_LOCKED: {  // another connection held it past the busy timeout
      const char* file = sqlite3_db_filename(db, "main");
      const int os_error = sqlite3_system_errno(db);
      throw DatabaseError(std::string(file && *file ? file : "database") + ": " + message +
                          (os_error ? std::string(" (") + std::strerror(os_error) + ")" : ""));
    }
    default:
      throw std::runtime_error(what + ": " + message);
  }
}

// A prepared statement with positional binding; finalised on scope exit. Errors: see
// throw_sqlite_error.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
      throw_sqlite_error(db, "sqlite prepare");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.c_str(), int(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  template <typename T>
  Statement& bind(int i, const std::optional<T>& v) {
    if (v) return bind(i, *v);
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  bool step() {  // true while a row is available
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw_sqlite_error(db_, "sqlite step");
  }
  void run() { step(); }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? reinterpret_cast<const char*>(t) : "";
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// Runs one or more statements without results; errors: see throw_sqlite_error.
inline void exec_sql(sqlite3* db, const std::string& sql) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
    throw_sqlite_error(db, "sqlite");
}

// Ends an open transaction without its changes; nothing when SQLite already rolled it back
// (it does after some I/O errors), and no throw: it runs while another error propagates.
inline void rollback(sqlite3* db) {
  if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
}

}  // namespace kvb
