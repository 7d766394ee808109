#include "server/job_store.h"

#include <chrono>
#include <limits>
#include <string_view>

#include "util/error.h"

namespace h3::server {

namespace {

// Version 1: the tables below. A database of a later version is refused rather than misread.
constexpr int kSchemaVersion = 1;
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- creation order
  id TEXT NOT NULL UNIQUE,
  status TEXT NOT NULL CHECK (status IN ('queued', 'in_progress', 'completed', 'failed', 'cancelled')),
  created_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL DEFAULT 0,
  completed_at INTEGER NOT NULL DEFAULT 0,
  progress INTEGER NOT NULL DEFAULT 0,
  phase TEXT NOT NULL DEFAULT '',
  request TEXT NOT NULL,
  prompt TEXT NOT NULL,
  width INTEGER NOT NULL,
  height INTEGER NOT NULL,
  frames INTEGER NOT NULL,
  steps INTEGER NOT NULL,
  seed TEXT NOT NULL,  -- a uint64 in decimal: SQLite's integers are signed
  starts INTEGER NOT NULL DEFAULT 0,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  error_code TEXT,
  error_message TEXT
);
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status, seq);
CREATE TABLE IF NOT EXISTS files (
  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  role TEXT NOT NULL,
  name TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  PRIMARY KEY (job_id, name)
);
)sql";

constexpr const char* kJobColumns =
    "id, status, created_at, started_at, completed_at, progress, phase, request, prompt, width, height, frames, "
    "steps, seed, starts, cancel_requested, error_code, error_message";

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

JobStatus status_from_name(std::string_view name) {
  for (JobStatus s : kAllJobStatuses)
    if (name == job_status_name(s)) return s;
  fail("the job database holds an unknown status \"", name, "\"");
}

// One prepared statement; bind() numbers its parameters from 1 in call order.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
      fail("the job database refused a query (", sqlite3_errmsg(db), ")");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int64_t v) {
    check(sqlite3_bind_int64(stmt_, ++bound_, v));
    return *this;
  }
  Statement& bind(const std::string& v) {
    check(sqlite3_bind_text(stmt_, ++bound_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Statement& bind_null() {
    check(sqlite3_bind_null(stmt_, ++bound_));
    return *this;
  }
  // True while a row is available.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail("the job database failed (", sqlite3_errmsg(db_), ")");
  }
  void run() { (void)step(); }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail("the job database refused a value (", sqlite3_errmsg(db_), ")");
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int bound_ = 0;
};

void exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    fail("the job database failed (", msg, ")");
  }
}

// BEGIN IMMEDIATE ... COMMIT, rolled back when the scope is left without commit().
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    exec(db_, "COMMIT");
    done_ = true;
  }

 private:
  sqlite3* db_;
  bool done_ = false;
};

Job read_job(const Statement& s) {
  Job j;
  j.id = s.text(0);
  j.status = status_from_name(s.text(1));
  j.created_at = s.integer(2);
  j.started_at = s.integer(3);
  j.completed_at = s.integer(4);
  j.progress = s.integer(5);
  j.phase = s.text(6);
  j.request = s.text(7);
  j.prompt = s.text(8);
  j.width = s.integer(9);
  j.height = s.integer(10);
  j.frames = s.integer(11);
  j.steps = s.integer(12);
  j.seed = std::stoull(s.text(13));
  j.starts = s.integer(14);
  j.cancel_requested = s.integer(15) != 0;
  if (!s.is_null(16)) j.error = JobError{s.text(16), s.text(17)};
  return j;
}

void set_status(sqlite3* db, const std::string& id, JobStatus status, const std::optional<JobError>& error) {
  Statement s(db,
              "UPDATE jobs SET status = ?, phase = '', completed_at = ?, error_code = ?, error_message = ? "
              "WHERE id = ?");
  s.bind(std::string(job_status_name(status))).bind(now_seconds());
  if (error)
    s.bind(error->code).bind(error->message);
  else
    s.bind_null().bind_null();
  s.bind(id).run();
}

}  // namespace

const char* job_status_name(JobStatus s) {
  switch (s) {
    case JobStatus::Queued: return "queued";
    case JobStatus::InProgress: return "in_progress";
    case JobStatus::Completed: return "completed";
    case JobStatus::Failed: return "failed";
    case JobStatus::Cancelled: return "cancelled";
  }
  return "?";
}

JobStore::JobStore(const std::string& path) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    fail(path, ": cannot open the job database (", msg, ")");
  }
  try {
    sqlite3_busy_timeout(db_, 5000);  // a reader in another process (sqlite3 on the command line) waits, not fails
    // WAL: a commit survives the process being killed; synchronous=FULL: and the machine losing power.
    exec(db_, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON");
    Statement version(db_, "PRAGMA user_version");
    version.step();
    const int64_t v = version.integer(0);
    if (v > kSchemaVersion)
      fail(path, ": the job database was made by a later h3 (schema version ", v, "; this one reads ",
           kSchemaVersion, ")");
    exec(db_, kSchema);
    exec(db_, cat("PRAGMA user_version = ", kSchemaVersion).c_str());
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
}

JobStore::~JobStore() { sqlite3_close(db_); }

std::vector<std::string> JobStore::recover() {
  std::lock_guard lock(mutex_);
  Transaction t(db_);
  std::vector<std::string> lines;
  Statement running(db_, "SELECT id, starts, cancel_requested FROM jobs WHERE status = 'in_progress' ORDER BY seq");
  while (running.step()) {
    const std::string id = running.text(0);
    const int64_t starts = running.integer(1);
    if (running.integer(2) != 0) {
      set_status(db_, id, JobStatus::Cancelled, std::nullopt);
      lines.push_back(cat(id, ": cancelled (a cancel was asked for before the server stopped)"));
    } else if (starts >= kMaxStarts) {
      set_status(db_, id, JobStatus::Failed,
                 JobError{"server_stopped",
                          cat("The server stopped while running this job ", starts,
                              " times (killed or crashed, e.g. out of memory); it is not started again.")});
      lines.push_back(cat(id, ": failed (the server stopped during each of its ", starts, " starts)"));
    } else {
      Statement(db_, "UPDATE jobs SET status = 'queued', progress = 0, phase = '' WHERE id = ?").bind(id).run();
      lines.push_back(cat(id, ": queued again (the server stopped while it ran)"));
    }
  }
  t.commit();
  return lines;
}

bool JobStore::add(const Job& job, const std::vector<JobFile>& files, int64_t max_queued) {
  std::lock_guard lock(mutex_);
  Transaction t(db_);
  Statement queued(db_, "SELECT count(*) FROM jobs WHERE status = 'queued'");
  queued.step();
  if (queued.integer(0) >= max_queued) return false;
  Statement(db_,
            "INSERT INTO jobs (id, status, created_at, request, prompt, width, height, frames, steps, seed) "
            "VALUES (?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?)")
      .bind(job.id)
      .bind(job.created_at)
      .bind(job.request)
      .bind(job.prompt)
      .bind(job.width)
      .bind(job.height)
      .bind(job.frames)
      .bind(job.steps)
      .bind(std::to_string(job.seed))
      .run();
  for (const JobFile& f : files)
    Statement(db_, "INSERT INTO files (job_id, role, name, bytes) VALUES (?, ?, ?, ?)")
        .bind(job.id)
        .bind(f.role)
        .bind(f.name)
        .bind(f.bytes)
        .run();
  t.commit();
  return true;
}

std::optional<Job> JobStore::get(const std::string& id) const {
  std::lock_guard lock(mutex_);
  Statement s(db_, cat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?"));
  s.bind(id);
  if (!s.step()) return std::nullopt;
  return read_job(s);
}

std::vector<JobFile> JobStore::files(const std::string& id) const {
  std::lock_guard lock(mutex_);
  Statement s(db_, "SELECT role, name, bytes FROM files WHERE job_id = ? ORDER BY rowid");
  s.bind(id);
  std::vector<JobFile> out;
  while (s.step()) out.push_back({s.text(0), s.text(1), s.integer(2)});
  return out;
}

std::optional<JobFile> JobStore::file(const std::string& id, const std::string& role) const {
  for (JobFile& f : files(id))
    if (f.role == role) return std::move(f);
  return std::nullopt;
}

std::optional<Job> JobStore::start_next() {
  std::lock_guard lock(mutex_);
  Transaction t(db_);
  Statement next(db_, "SELECT id FROM jobs WHERE status = 'queued' ORDER BY seq LIMIT 1");
  if (!next.step()) return std::nullopt;
  const std::string id = next.text(0);
  Statement(db_,
            "UPDATE jobs SET status = 'in_progress', started_at = ?, starts = starts + 1, progress = 0, phase = '' "
            "WHERE id = ?")
      .bind(now_seconds())
      .bind(id)
      .run();
  Statement s(db_, cat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?"));
  s.bind(id).step();
  Job job = read_job(s);
  t.commit();
  return job;
}

void JobStore::set_progress(const std::string& id, int64_t progress, const std::string& phase) {
  std::lock_guard lock(mutex_);
  Statement(db_, "UPDATE jobs SET progress = ?, phase = ? WHERE id = ? AND status = 'in_progress'")
      .bind(progress)
      .bind(phase)
      .bind(id)
      .run();
}

bool JobStore::complete(const std::string& id, const std::vector<JobFile>& outputs) {
  std::lock_guard lock(mutex_);
  Transaction t(db_);
  Statement asked(db_, "SELECT cancel_requested FROM jobs WHERE id = ?");
  asked.bind(id);
  if (asked.step() && asked.integer(0) != 0) {
    set_status(db_, id, JobStatus::Cancelled, std::nullopt);
    t.commit();
    return false;
  }
  for (const JobFile& f : outputs)
    Statement(db_, "INSERT OR REPLACE INTO files (job_id, role, name, bytes) VALUES (?, ?, ?, ?)")
        .bind(id)
        .bind(f.role)
        .bind(f.name)
        .bind(f.bytes)
        .run();
  set_status(db_, id, JobStatus::Completed, std::nullopt);
  Statement(db_, "UPDATE jobs SET progress = 100 WHERE id = ?").bind(id).run();
  t.commit();
  return true;
}

void JobStore::finish(const std::string& id, JobStatus status, const std::optional<JobError>& error) {
  H3_CHECK(status == JobStatus::Failed || status == JobStatus::Cancelled, "JobStore::finish: ",
           job_status_name(status), " is not an end of a run");
  std::lock_guard lock(mutex_);
  set_status(db_, id, status, error);
}

void JobStore::requeue(const std::string& id) {
  std::lock_guard lock(mutex_);
  Statement(db_,
            "UPDATE jobs SET status = 'queued', progress = 0, phase = '', starts = starts - 1 "
            "WHERE id = ? AND status = 'in_progress'")
      .bind(id)
      .run();
}

JobStore::Removal JobStore::cancel_or_remove(const std::string& id) {
  std::lock_guard lock(mutex_);
  Transaction t(db_);
  Statement s(db_, "SELECT status FROM jobs WHERE id = ?");
  s.bind(id);
  if (!s.step()) return Removal::Unknown;
  Removal r = Removal::Removed;
  switch (status_from_name(s.text(0))) {
    case JobStatus::Queued:
      set_status(db_, id, JobStatus::Cancelled, std::nullopt);
      r = Removal::Cancelled;
      break;
    case JobStatus::InProgress:
      Statement(db_, "UPDATE jobs SET cancel_requested = 1 WHERE id = ?").bind(id).run();
      r = Removal::CancelRequested;
      break;
    default: Statement(db_, "DELETE FROM jobs WHERE id = ?").bind(id).run();
  }
  t.commit();
  return r;
}

std::optional<JobStore::Page> JobStore::list(const ListQuery& q) const {
  std::lock_guard lock(mutex_);
  int64_t after_seq = q.ascending ? 0 : std::numeric_limits<int64_t>::max();
  if (!q.after.empty()) {
    Statement s(db_, "SELECT seq FROM jobs WHERE id = ?");
    s.bind(q.after);
    if (!s.step()) return std::nullopt;
    after_seq = s.integer(0);
  }
  Statement s(db_, cat("SELECT ", kJobColumns, " FROM jobs WHERE seq ", q.ascending ? ">" : "<", " ? ORDER BY seq ",
                       q.ascending ? "ASC" : "DESC", " LIMIT ?"));
  s.bind(after_seq).bind(q.limit + 1);
  Page page;
  while (s.step()) page.jobs.push_back(read_job(s));
  page.has_more = static_cast<int64_t>(page.jobs.size()) > q.limit;
  if (page.has_more) page.jobs.pop_back();
  return page;
}

std::map<JobStatus, int64_t> JobStore::count_by_status() const {
  std::lock_guard lock(mutex_);
  std::map<JobStatus, int64_t> out;
  for (JobStatus st : kAllJobStatuses) out[st] = 0;
  Statement s(db_, "SELECT status, count(*) FROM jobs GROUP BY status");
  while (s.step()) out[status_from_name(s.text(0))] = s.integer(1);
  return out;
}

}  // namespace h3::server
