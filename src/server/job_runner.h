// The one thread that generates: it owns the Engine's generations, takes the oldest queued job from the store, runs
// it with its progress written to the store, and records its MP4 and thumbnail (server/job_store.h's rules).
//
// Progress 0..100 by phase: the loads and encodes before the first pass 0..kDenoiseStart, the passes up to
// kDenoiseEnd, the video decode (by frames) up to kDecodeEnd, the audio decode and the write after it; 100 once the
// MP4 is recorded. Previews are decoded on demand: a client that asks for one (preview()) gets the latest, and the
// pass after its request decodes a fresh one (Engine::preview_frame), so previews cost nothing nobody watches.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "h3/h3.h"
#include "server/job_store.h"

namespace h3::server {

inline constexpr int64_t kDenoiseStart = 10, kDenoiseEnd = 90, kDecodeEnd = 97, kWriteProgress = 99;
// A phase as the API and the metrics name it ("denoise", "video_decode", ...); the runner's own last phase: "write".
std::string phase_label(Phase p);
inline constexpr const char* kWritePhase = "write";
int64_t job_progress(Phase p, int64_t done, int64_t total);

// The folder of job `id` under `jobs_dir`, and the names the runner writes there.
std::string job_folder(const std::string& jobs_dir, const std::string& id);
inline constexpr const char* kVideoFile = "video.mp4";
inline constexpr const char* kThumbnailFile = "thumbnail.png";

class JobRunner {
 public:
  JobRunner(Engine& engine, JobStore& store, std::string jobs_dir);
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  void start();
  // A job was queued.
  void wake();
  // DELETE of a running job: when `id` runs, it stops at its next step (the store already holds the request).
  void cancel(const std::string& id);
  // Shutdown: a job still generating stops at its next step and is queued again; one that is writing its MP4
  // finishes. Returns once the thread has ended.
  void stop();

  struct Preview {
    int64_t pass = 0, passes = 0;  // the pass it shows (1-based) of the job's passes
    std::vector<uint8_t> png;
  };
  // The running job `id`'s latest preview, if it has one yet; asks for a fresh one after the next pass.
  std::optional<Preview> preview(const std::string& id);
  // Wall seconds per phase (phase_label) summed over the jobs this process ran.
  std::map<std::string, double> phase_seconds() const;

 private:
  void loop();
  void run(const Job& job);
  void generate_and_record(const Job& job);

  Engine& engine_;
  JobStore& store_;
  std::string jobs_dir_;
  std::thread thread_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool woken_ = false;
  bool stopping_ = false;
  std::string running_;          // the job generating now, empty when idle
  bool cancelled_ = false;       // the running job was deleted (not stopped by a shutdown)
  std::atomic<bool> interrupt_{false};  // the engine's cancel flag: a delete or a shutdown
  std::atomic<bool> preview_wanted_{false};
  std::optional<Preview> preview_;
  std::map<std::string, double> phase_seconds_;
};

}  // namespace h3::server
