#include "app/preview.h"

#include <algorithm>
#include <chrono>

#include "app/progress.h"

namespace h3::app {

namespace {

constexpr int kGutter = 4;
constexpr uint8_t kGutterGray = 32;

// Frame f shrunk by `factor` (mean of each factor × factor block; edge blocks average what they cover).
void shrink_into(const Rgb8Video& v, int f, int factor, Rgb8Image& sheet, int x0, int y0) {
  const uint8_t* src = v.frame(f);
  const int w = (v.width + factor - 1) / factor, h = (v.height + factor - 1) / factor;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        int sum = 0, n = 0;
        for (int dy = 0; dy < factor && y * factor + dy < v.height; ++dy)
          for (int dx = 0; dx < factor && x * factor + dx < v.width; ++dx, ++n)
            sum += src[((y * factor + dy) * v.width + x * factor + dx) * 3 + c];
        sheet.rgb[((y0 + y) * sheet.width + x0 + x) * 3 + c] = static_cast<uint8_t>((sum + n / 2) / n);
      }
}

}  // namespace

Rgb8Image contact_sheet(const Rgb8Video& video, int frames, int columns) {
  H3_CHECK(video.frames > 0 && frames > 0 && columns > 0, "a contact sheet needs frames");
  const int n = std::min(frames, video.frames);
  const int cols = std::min(columns, n), rows = (n + cols - 1) / cols;
  const int factor = std::max((video.width + kContactSheetTileMax - 1) / kContactSheetTileMax,
                              (video.height + kContactSheetTileMax - 1) / kContactSheetTileMax);
  const int tw = (video.width + factor - 1) / factor, th = (video.height + factor - 1) / factor;
  Rgb8Image sheet;
  sheet.width = cols * tw + (cols - 1) * kGutter;
  sheet.height = rows * th + (rows - 1) * kGutter;
  sheet.rgb.assign(static_cast<size_t>(sheet.width) * sheet.height * 3, kGutterGray);
  for (int i = 0; i < n; ++i) {
    const int f = n == 1 ? 0 : static_cast<int>((static_cast<int64_t>(i) * (video.frames - 1) + (n - 1) / 2) / (n - 1));
    shrink_into(video, f, factor, sheet, (i % cols) * (tw + kGutter), (i / cols) * (th + kGutter));
  }
  return sheet;
}

Previewer::Previewer(TerminalSupport support, int zoom, std::FILE* out)
    : support_(std::move(support)), zoom_(zoom), out_(out) {}

bool Previewer::show(const std::string& caption, const Rgb8Image& image) {
  if (failed_) return false;
  try {
    std::fprintf(out_, "%s\n", caption.c_str());
    write_terminal_image(out_, support_, image, zoom_);
    return true;
  } catch (const Error& e) {
    std::fprintf(stderr, "h3: previews off: %s\n", e.what());
    failed_ = true;
    return false;
  }
}

double Previewer::show_pass(Engine& engine, const ResolvedRequest& r, const PassProgress& pass,
                            ProgressDisplay& progress) {
  if (failed_) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  const Tensor frame = engine.preview_frame(pass.video_latents(), r.width, r.height);
  const Rgb8Video v = rgb8_from_tensor(frame);
  progress.clear_line();
  show(cat("preview: pass ", pass.pass + 1, "/", pass.passes, ", middle frame of the current estimate"),
       frame_image(v, 0));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Previewer::show_final(const Rgb8Video& video) {
  const int n = std::min(kContactSheetFrames, video.frames);
  show(cat("final: ", n, " of ", video.frames, " frames, evenly spaced"), contact_sheet(video));
}

}  // namespace h3::app
