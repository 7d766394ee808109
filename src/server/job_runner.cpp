#include "server/job_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "media/png_writer.h"
#include "media/video_frames.h"
#include "pipeline/request_json.h"

namespace h3::server {

namespace fs = std::filesystem;

std::string phase_label(Phase p) {
  std::string s = phase_name(p);
  std::replace(s.begin(), s.end(), ' ', '_');
  return s;
}

int64_t job_progress(Phase p, int64_t done, int64_t total) {
  const double part = total > 0 ? static_cast<double>(std::clamp<int64_t>(done, 0, total)) / total : 0.0;
  auto within = [&](int64_t from, int64_t to) { return from + static_cast<int64_t>(part * (to - from)); };
  switch (p) {
    case Phase::Load: return 0;
    case Phase::ReadReferences: return 2;
    case Phase::EncodePrompt: return 4;
    case Phase::EncodeKeyframes: return 6;
    case Phase::EncodeReferences: return 8;
    case Phase::Denoise: return within(kDenoiseStart, kDenoiseEnd);
    case Phase::DecodeVideo: return within(kDenoiseEnd, kDecodeEnd);
    case Phase::DecodeAudio: return kDecodeEnd;
  }
  return 0;
}

std::string job_folder(const std::string& jobs_dir, const std::string& id) {
  return (fs::path(jobs_dir) / id).string();
}

JobRunner::JobRunner(Engine& engine, JobStore& store, std::string jobs_dir)
    : engine_(engine), store_(store), jobs_dir_(std::move(jobs_dir)) {}

JobRunner::~JobRunner() { stop(); }

void JobRunner::start() { thread_ = std::thread([this] { loop(); }); }

void JobRunner::wake() {
  std::lock_guard lock(mutex_);
  woken_ = true;
  wake_.notify_one();
}

void JobRunner::cancel(const std::string& id) {
  std::lock_guard lock(mutex_);
  if (running_ != id) return;
  cancelled_ = true;
  interrupt_ = true;
}

void JobRunner::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    interrupt_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

std::optional<JobRunner::Preview> JobRunner::preview(const std::string& id) {
  std::lock_guard lock(mutex_);
  if (running_ != id) return std::nullopt;
  preview_wanted_ = true;
  return preview_;
}

std::map<std::string, double> JobRunner::phase_seconds() const {
  std::lock_guard lock(mutex_);
  return phase_seconds_;
}

void JobRunner::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (stopping_) return;
    }
    std::optional<Job> job;
    try {
      job = store_.start_next();
    } catch (const Error& e) {
      std::fprintf(stderr, "h3 serve: %s\n", e.what());
    }
    if (job) {
      try {
        run(*job);
      } catch (const std::exception& e) {  // the store failed while recording the outcome
        std::fprintf(stderr, "h3 serve: %s: %s\n", job->id.c_str(), e.what());
      }
      continue;
    }
    // Nothing queued: wait for a submission (a timeout too, in case the database was changed from outside).
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, std::chrono::seconds(1), [&] { return woken_ || stopping_; });
    woken_ = false;
  }
}

void JobRunner::run(const Job& job) {
  {
    std::lock_guard lock(mutex_);
    running_ = job.id;
    cancelled_ = false;
    // A shutdown asked for before this job started leaves it queued.
    interrupt_ = stopping_;
    preview_.reset();
  }
  // A DELETE between the store's start and running_ above found no running job to cancel: the store has it.
  if (const std::optional<Job> now = store_.get(job.id); now && now->cancel_requested) cancel(job.id);
  // The job stops being the running one however this ends (the store can fail while recording the outcome).
  struct Idle {
    JobRunner& r;
    ~Idle() {
      std::lock_guard lock(r.mutex_);
      r.running_.clear();
      r.preview_.reset();
    }
  } idle{*this};
  std::fprintf(stderr, "h3 serve: %s started (%lldx%lld, %lld frames, %lld passes)\n", job.id.c_str(),
               static_cast<long long>(job.width), static_cast<long long>(job.height),
               static_cast<long long>(job.frames), static_cast<long long>(job.steps));
  std::string outcome;
  try {
    generate_and_record(job);
    outcome = "completed";
  } catch (const Cancelled&) {
    bool deleted;
    {
      std::lock_guard lock(mutex_);
      deleted = cancelled_;
    }
    if (deleted) {
      store_.finish(job.id, JobStatus::Cancelled, std::nullopt);
      outcome = "cancelled";
    } else {
      store_.requeue(job.id);
      outcome = "queued again (the server is stopping)";
    }
  } catch (const std::exception& e) {
    store_.finish(job.id, JobStatus::Failed, JobError{"generation_failed", e.what()});
    outcome = cat("failed: ", e.what());
  }
  std::fprintf(stderr, "h3 serve: %s %s\n", job.id.c_str(), outcome.c_str());
}

void JobRunner::generate_and_record(const Job& job) {
  const std::string dir = job_folder(jobs_dir_, job.id);
  const GenerationRequest request = parse_request_json(job.request, dir);

  int64_t last_progress = -1;
  std::string last_phase;
  auto report = [&](int64_t progress, const std::string& phase) {
    if (progress == last_progress && phase == last_phase) return;
    store_.set_progress(job.id, progress, phase);
    last_progress = progress;
    last_phase = phase;
  };
  GenerateCallbacks cb;
  cb.cancel = &interrupt_;
  cb.on_progress = [&](const ProgressEvent& e) { report(job_progress(e.phase, e.done, e.total), phase_label(e.phase)); };
  cb.on_pass = [&](const PassProgress& p) {
    if (!preview_wanted_.exchange(false)) return;
    const Rgb8Video frame = rgb8_from_tensor(engine_.preview_frame(p.video_latents()));
    Preview made{p.pass + 1, p.passes, encode_png(frame_image(frame, 0))};
    std::lock_guard lock(mutex_);
    preview_ = std::move(made);
  };
  const GenerationResult result = engine_.generate(request, cb);

  // Generated: a shutdown now lets the write finish; a delete still cancels.
  {
    std::lock_guard lock(mutex_);
    if (cancelled_) throw Cancelled();
  }
  report(kWriteProgress, kWritePhase);
  const auto write_start = std::chrono::steady_clock::now();
  const Rgb8Video frames = rgb8_from_tensor(result.video);
  const std::string video = (fs::path(dir) / kVideoFile).string();
  const std::string thumbnail = (fs::path(dir) / kThumbnailFile).string();
  write_generation_mp4(video, frames, result);
  write_png(thumbnail, frame_image(frames, frames.frames / 2));
  const double write_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - write_start).count();
  {
    std::lock_guard lock(mutex_);
    for (const PhaseTiming& t : result.timings) phase_seconds_[phase_label(t.phase)] += t.wall_seconds;
    phase_seconds_[kWritePhase] += write_seconds;
  }
  const std::vector<JobFile> outputs = {
      {"video", kVideoFile, static_cast<int64_t>(fs::file_size(video))},
      {"thumbnail", kThumbnailFile, static_cast<int64_t>(fs::file_size(thumbnail))}};
  if (!store_.complete(job.id, outputs)) {
    fs::remove(video);
    fs::remove(thumbnail);
    {
      std::lock_guard lock(mutex_);
      cancelled_ = true;
    }
    throw Cancelled();
  }
}

}  // namespace h3::server
