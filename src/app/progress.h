// Progress on stderr while a video is made: one updating line with a bar on a terminal, plain lines otherwise
// (logs, tests); the per-phase summary afterwards; --profile's table.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "h3/h3.h"

namespace h3::app {

class ProgressDisplay {
 public:
  // `live`: redraw one line in place (stderr is a terminal). `silent` (--quiet): show nothing.
  ProgressDisplay(std::FILE* out, bool live, bool silent = false);

  void on_event(const ProgressEvent& e);
  // A phase of the CLI's own (writing the outputs).
  void message(const std::string& text);
  // Erases the live line so other output (a preview image, the summary) can be printed; the next event redraws it.
  void clear_line();

 private:
  void show(const std::string& text, bool final_line);
  std::FILE* out_;
  bool live_;
  bool silent_;
  size_t columns_ = 0;  // the terminal's width, 0 when unknown
  bool line_open_ = false;
  Phase last_phase_ = Phase::Load;
  int64_t last_done_ = -1;
  std::chrono::steady_clock::time_point denoise_start_;
};

// Per-phase process CPU time (user + system, all threads), taken at the engine's phase boundaries: with wall time
// it shows how many cores a phase kept busy.
class CpuClock {
 public:
  void on_event(const ProgressEvent& e);
  void stop();
  double cpu_seconds(Phase p) const;

 private:
  struct Span {
    Phase phase;
    double cpu = 0;
  };
  std::vector<Span> spans_;
  double phase_start_ = 0;
  bool running_ = false;
};
double process_cpu_seconds();
uint64_t peak_resident_bytes();

// One line: "load 1.20 s, prompt 0.05 s (cached), denoise 4.1 s (20 passes), ..., write 0.3 s; total 6.0 s".
std::string phase_summary(const GenerationResult& r, double write_seconds, double total_seconds);
// The --profile table (wall, CPU, peak device memory where reported, preview time).
struct WriteTiming {
  double wall_seconds = 0, cpu_seconds = 0;
};
std::string profile_table(const GenerationResult& r, const CpuClock& cpu, double preview_seconds,
                          const WriteTiming& write, double total_seconds);

}  // namespace h3::app
