// --show: after every denoising pass, the middle frame of the current clean estimate, inline in the terminal
// (kitty graphics or iTerm2 inline images); after the decode, a contact sheet of the final frames. Images go to
// stdout, each after a one-line caption.
#pragma once
#include <cstdio>
#include <string>

#include "h3/h3.h"
#include "media/terminal_image.h"
#include "media/video_frames.h"

namespace h3::app {

class ProgressDisplay;

// Up to this many evenly spaced frames (first and last included) make the final contact sheet.
constexpr int kContactSheetFrames = 8;
constexpr int kContactSheetColumns = 4;
// Frames wider or taller than this are shrunk by a whole factor on the sheet.
constexpr int kContactSheetTileMax = 256;

// The evenly spaced frames of a contact sheet, `columns` per row, each shrunk by the same whole factor (box
// average) to fit kContactSheetTileMax, separated by a dark gutter.
Rgb8Image contact_sheet(const Rgb8Video& video, int frames = kContactSheetFrames, int columns = kContactSheetColumns);

class Previewer {
 public:
  Previewer(TerminalSupport support, int zoom, std::FILE* out = stdout);

  // Decodes the pass's clean estimate's middle frame, upscaled to the request's output canvas `r` as its video is,
  // and shows it; returns the seconds it took. A display failure (e.g. a closed terminal) prints one warning and
  // turns previews off.
  double show_pass(Engine& engine, const ResolvedRequest& r, const PassProgress& pass, ProgressDisplay& progress);
  void show_final(const Rgb8Video& video);

 private:
  bool show(const std::string& caption, const Rgb8Image& image);
  TerminalSupport support_;
  int zoom_;
  std::FILE* out_;
  bool failed_ = false;
};

}  // namespace h3::app
