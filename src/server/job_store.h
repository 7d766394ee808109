// The server's jobs, kept in SQLite (Debian's libsqlite3) so that they outlive the process: every job, its state
// and the files of its folder. One connection, serialized by a mutex: the HTTP threads and the job runner share it.
//
// A job's life: queued → in_progress → completed | failed | cancelled (queued → cancelled too). Durability rules:
//   - a job is recorded (queued) only once its request is valid and its uploads are saved;
//   - a job is completed in the same transaction that records its MP4, which was written whole beforehand
//     (OutputFile: a temporary file renamed into place), so a recorded video is never partial;
//   - recover(), at start-up, settles what a killed or crashed server left: a job left in_progress is queued again
//     (its progress reset), or failed once it has been started kMaxStarts times (a job that kills the server is not
//     tried forever), or cancelled when a cancel was asked for; queued jobs stay queued.
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/video_request.h"

namespace h3::server {

enum class JobStatus { Queued, InProgress, Completed, Failed, Cancelled };
const char* job_status_name(JobStatus s);  // "queued", "in_progress", "completed", "failed", "cancelled"
inline constexpr JobStatus kAllJobStatuses[] = {JobStatus::Queued, JobStatus::InProgress, JobStatus::Completed,
                                                JobStatus::Failed, JobStatus::Cancelled};

// Starts of one job after which a server that stops during it marks it failed instead of queueing it again.
inline constexpr int64_t kMaxStarts = 2;

struct JobError {
  std::string code;     // machine-readable: "invalid_request", "generation_failed", "server_stopped"
  std::string message;  // one sentence
};

// A file in a job's folder: an upload the request reads, the MP4, the thumbnail.
struct JobFile {
  std::string role;  // "input_reference", "last_frame", "reference_image", ..., "video", "thumbnail"
  std::string name;  // inside the job's folder
  int64_t bytes = 0;
};

struct Job {
  std::string id;
  JobStatus status = JobStatus::Queued;
  int64_t created_at = 0;    // Unix seconds
  int64_t started_at = 0;    // of the latest start; 0: never started
  int64_t completed_at = 0;  // 0: not finished
  int64_t progress = 0;      // 0..100
  std::string phase;         // the running phase ("denoise", ...); empty when not running
  std::string request;       // the request as `h3 tool generate` JSON, paths relative to the job's folder
  std::string prompt;
  int64_t width = 0, height = 0, frames = 0, steps = 0;
  uint64_t seed = 0;
  int64_t starts = 0;
  bool cancel_requested = false;
  std::optional<JobError> error;
};

class JobStore {
 public:
  // Opens (or creates) the database at `path`.
  explicit JobStore(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Settles the jobs a stopped server left in_progress (see the rules above); one line per job it changed.
  std::vector<std::string> recover();

  // Records a queued job with its uploads, unless `max_queued` jobs are queued already (then false, nothing
  // recorded): the count and the insert are one transaction.
  bool add(const Job& job, const std::vector<JobFile>& files, int64_t max_queued);
  std::optional<Job> get(const std::string& id) const;
  std::vector<JobFile> files(const std::string& id) const;
  std::optional<JobFile> file(const std::string& id, const std::string& role) const;

  // The oldest queued job, now in_progress (started now, one more start); nothing when none is queued.
  std::optional<Job> start_next();
  void set_progress(const std::string& id, int64_t progress, const std::string& phase);
  // in_progress → completed, recording the files it wrote (the MP4 and its thumbnail); or, when a cancel was asked
  // for meanwhile, → cancelled with nothing recorded (false: the files are the caller's to remove).
  bool complete(const std::string& id, const std::vector<JobFile>& outputs);
  // in_progress → failed (with `error`) or cancelled.
  void finish(const std::string& id, JobStatus status, const std::optional<JobError>& error);
  // in_progress → queued, the start not counted (a server stopping on request).
  void requeue(const std::string& id);

  // DELETE /v1/videos/{id}: a queued job is cancelled, a running one asked to cancel (the runner then marks it
  // cancelled), a finished one removed from the database (its folder is the caller's to remove).
  enum class Removal { Unknown, Cancelled, CancelRequested, Removed };
  Removal cancel_or_remove(const std::string& id);

  struct Page {
    std::vector<Job> jobs;
    bool has_more = false;
  };
  // Jobs by creation order (ListQuery::ascending) after `after`; nothing when `after` names no job.
  std::optional<Page> list(const ListQuery& q) const;
  std::map<JobStatus, int64_t> count_by_status() const;

 private:
  sqlite3* db_ = nullptr;
  mutable std::mutex mutex_;
};

}  // namespace h3::server
