#include "app/progress.h"

#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include "app/outputs.h"
#include "util/error.h"

namespace h3::app {

namespace {

constexpr int kBarWidth = 24;

std::string bar(int64_t done, int64_t total) {
  const int64_t filled = total > 0 ? std::clamp<int64_t>(kBarWidth * done / total, 0, kBarWidth) : 0;
  std::string s(kBarWidth + 2, '.');
  s.front() = '[';
  s.back() = ']';
  std::fill_n(s.begin() + 1, filled, '#');
  return s;
}

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; }

}  // namespace

ProgressDisplay::ProgressDisplay(std::FILE* out, bool live, bool silent) : out_(out), live_(live), silent_(silent) {
  winsize ws{};
  if (live_ && ::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) columns_ = ws.ws_col;
}

void ProgressDisplay::show(const std::string& text, bool final_line) {
  if (silent_) return;
  if (live_) {
    // A line longer than the terminal would wrap, and \r could no longer redraw it in place.
    const std::string fitted = columns_ > 0 && text.size() >= columns_ ? text.substr(0, columns_ - 1) : text;
    std::fprintf(out_, "\r\033[K%s", fitted.c_str());
    line_open_ = !final_line;
    if (final_line) std::fputc('\n', out_);
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void ProgressDisplay::on_event(const ProgressEvent& e) {
  const bool repeat = e.phase == last_phase_ && e.done == last_done_;
  last_phase_ = e.phase;
  last_done_ = e.done;
  if (repeat) return;
  switch (e.phase) {
    case Phase::Load:
      show("h3: loading the model (tokenizer, text encoder, transformer, VAEs)", false);
      break;
    case Phase::EncodePrompt: show("h3: encoding the prompt", false); break;
    case Phase::EncodeKeyframes: show("h3: encoding the keyframes", false); break;
    case Phase::ReadReferences: show("h3: reading the references", false); break;
    case Phase::EncodeReferences: show("h3: encoding the references", false); break;
    case Phase::Denoise: {
      if (e.done == 0) {
        denoise_start_ = std::chrono::steady_clock::now();
        show(cat("h3: denoise ", bar(0, e.total), " 0/", e.total, " passes"), false);
        break;
      }
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - denoise_start_).count();
      const double eta = elapsed / static_cast<double>(e.done) * static_cast<double>(e.total - e.done);
      show(cat("h3: denoise ", bar(e.done, e.total), " pass ", e.done, "/", e.total, ", ", format_seconds(elapsed),
               e.done < e.total ? cat(", ETA ", format_seconds(eta)) : std::string()),
           false);
      break;
    }
    case Phase::DecodeVideo:
      if (e.done == 0)
        show("h3: video decode", false);
      else
        show(cat("h3: video decode ", bar(e.done, e.total), " ", e.done, "/", e.total, " frames"), false);
      break;
    case Phase::DecodeAudio: show("h3: audio decode", false); break;
  }
}

void ProgressDisplay::message(const std::string& text) { show("h3: " + text, false); }

void ProgressDisplay::clear_line() {
  if (live_ && line_open_) {
    std::fputs("\r\033[K", out_);
    std::fflush(out_);
    line_open_ = false;
  }
}

double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

uint64_t peak_resident_bytes() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

void CpuClock::on_event(const ProgressEvent& e) {
  if (e.done != 0) return;  // a phase begins with done == 0
  if (running_ && spans_.back().phase == e.phase) return;
  stop();
  spans_.push_back({e.phase, 0});
  phase_start_ = process_cpu_seconds();
  running_ = true;
}

void CpuClock::stop() {
  if (!running_) return;
  spans_.back().cpu = process_cpu_seconds() - phase_start_;
  running_ = false;
}

double CpuClock::cpu_seconds(Phase p) const {
  double s = 0;
  for (const Span& span : spans_)
    if (span.phase == p) s += span.cpu;
  return s;
}

namespace {

// ", 11 evaluated" when --reuse skipped passes, else nothing.
std::string evaluations_note(const GenerationResult& r) {
  const int64_t passes = r.request.steps, evaluated = r.request.evaluated_passes;
  return evaluated < passes ? cat(", ", evaluated, " evaluated") : std::string();
}

}  // namespace

std::string phase_summary(const GenerationResult& r, double write_seconds, double total_seconds) {
  std::string out;
  for (const PhaseTiming& t : r.timings) {
    out += cat(out.empty() ? "" : ", ", phase_name(t.phase), " ", format_seconds(t.wall_seconds));
    if (t.phase == Phase::EncodePrompt && r.prompt_cache_hit) out += " (cached)";
    if (t.phase == Phase::Denoise) out += cat(" (", r.request.steps, " passes", evaluations_note(r), ")");
  }
  if (write_seconds > 0) out += cat(", write ", format_seconds(write_seconds));
  return cat(out, "; total ", format_seconds(total_seconds));
}

std::string profile_table(const GenerationResult& r, const CpuClock& cpu, double preview_seconds,
                          const WriteTiming& write, double total_seconds) {
  char line[160];
  std::string out = "profile:\n";
  if (const std::string controls = describe_speed_controls(r.request); !controls.empty())
    out += cat("  speed controls: ", controls, "\n");
  std::snprintf(line, sizeof line, "  %-14s %10s %10s %8s  %s\n", "phase", "wall", "cpu", "cores", "peak device memory");
  out += line;
  auto row = [&](const char* name, double wall, double cpu_s, uint64_t peak, const std::string& note) {
    std::snprintf(line, sizeof line, "  %-14s %10s %10s %8.1f  %s%s\n", name, format_seconds(wall).c_str(),
                  format_seconds(cpu_s).c_str(), wall > 0 ? cpu_s / wall : 0.0,
                  peak ? format_bytes(peak).c_str() : "-", note.c_str());
    out += line;
  };
  for (const PhaseTiming& t : r.timings) {
    std::string note;
    if (t.phase == Phase::Denoise) {
      const int64_t passes = r.request.steps;
      note = cat("   ", format_seconds((t.wall_seconds - preview_seconds) / static_cast<double>(passes)), "/pass",
                 evaluations_note(r));
      if (preview_seconds > 0) note += cat(", of which previews ", format_seconds(preview_seconds));
    }
    if (t.phase == Phase::EncodePrompt) note = cat("   ", r.prompt_tokens, " tokens", r.prompt_cache_hit ? ", cached" : "");
    row(phase_name(t.phase), t.wall_seconds, cpu.cpu_seconds(t.phase), t.peak_device_bytes, note);
  }
  if (write.wall_seconds > 0) row("write", write.wall_seconds, write.cpu_seconds, 0, "");
  std::snprintf(line, sizeof line, "  %-14s %10s\n", "total", format_seconds(total_seconds).c_str());
  out += line;
  out += cat("  peak resident host memory: ", format_bytes(peak_resident_bytes()), "\n");
  out += cat("  residency: ", r.residency.description, "\n");
  const GenerationResult::Residency& res = r.residency;
  if (res.copied_bytes > 0 && res.passes > 0) {
    // Overlap: the share of the copy time hidden behind compute (the rest the compute waited for).
    std::snprintf(line, sizeof line, "  streamed: %s per pass at %.1f GB/s, %.0f%% of the copy time overlapped\n",
                  format_bytes(res.copied_bytes / res.passes).c_str(),
                  res.copy_seconds > 0 ? static_cast<double>(res.copied_bytes) / res.copy_seconds / 1e9 : 0.0,
                  res.copy_seconds > 0 ? 100.0 * (1.0 - res.stall_seconds / res.copy_seconds) : 0.0);
    out += line;
  }
  return out;
}

}  // namespace h3::app
