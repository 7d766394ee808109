// Inline image previews in graphical terminals (the interactive --show feature).
//
// Two protocols: the kitty graphics protocol (kitty, Ghostty) and iTerm2 inline images (iTerm2, WezTerm,
// Konsole). Both get a PNG (libavcodec's encoder), base64-encoded. Detection reads the environment only,
// through a lookup function so tests can supply their own. Inside tmux or GNU screen detection answers
// None (they drop or mangle these sequences unless configured); H3_TERMINAL_IMAGES=kitty|iterm2|none
// overrides detection, and inside tmux a forced protocol is wrapped in tmux's passthrough
// (DCS "tmux;" ... ST, which needs `set -g allow-passthrough on`, tmux >= 3.3).
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "media/video_frames.h"

namespace h3 {

enum class TerminalProtocol { None, Kitty, Iterm2 };

const char* terminal_protocol_name(TerminalProtocol p);  // "kitty graphics", "iTerm2 inline images", "none"

struct TerminalSupport {
  TerminalProtocol protocol = TerminalProtocol::None;
  bool tmux_passthrough = false;  // wrap every sequence for tmux's passthrough
  std::string description;        // the terminal recognized, or why there is no protocol (for the warning)
};

// Returns the value of an environment variable, or null when unset (std::getenv's contract).
using EnvLookup = std::function<const char*(const char* name)>;

TerminalSupport detect_terminal(const EnvLookup& getenv_fn);
TerminalSupport detect_terminal();  // the process environment

struct TerminalImageOptions {
  // The displayed size is the pixel size times `zoom` (the picture itself is not resampled; the terminal
  // scales it). iTerm2 takes the size in pixels. The kitty protocol sizes images in character cells, so
  // zooming there needs the cell size in pixels; with it unknown (0) the image is shown at its own size.
  int zoom = 1;
  int cell_width_px = 0, cell_height_px = 0;
  bool tmux_passthrough = false;
};

// Standard base64 (RFC 4648, with '=' padding).
std::string base64_encode(const uint8_t* data, size_t size);

// The kitty graphics protocol limits one escape sequence's payload to 4096 base64 characters.
inline constexpr size_t kKittyChunkChars = 4096;

// The escape sequence(s) that display a PNG of `width`x`height` pixels (no trailing newline):
//   kitty:  ESC _ G a=T,f=100,q=2[,c=C,r=R],m=1 ; <≤4096 base64> ESC \   ESC _ G m=1 ; ... ESC \  ... m=0
//   iTerm2: ESC ] 1337 ; File=inline=1;size=<PNG bytes>;width=<W·zoom>px;height=<H·zoom>px;
//           preserveAspectRatio=1 : <base64> BEL
std::string terminal_image_sequence(TerminalProtocol protocol, const std::vector<uint8_t>& png, int width,
                                    int height, const TerminalImageOptions& options);
// Encodes `image` as PNG first.
std::string terminal_image_sequence(TerminalProtocol protocol, const Rgb8Image& image,
                                    const TerminalImageOptions& options);

// Writes the image and a newline to `fd` / `out` (flushed). The character cell size for kitty zooming is
// read from the terminal (TIOCGWINSZ) when `fd` is one. Throws h3::Error when the protocol is None or the
// write fails.
void write_terminal_image(int fd, const TerminalSupport& support, const Rgb8Image& image, int zoom = 1);
void write_terminal_image(std::FILE* out, const TerminalSupport& support, const Rgb8Image& image, int zoom = 1);

}  // namespace h3
