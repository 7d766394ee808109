#include "media/terminal_image.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "media/png_writer.h"
#include "util/error.h"

namespace h3 {

namespace {

constexpr char kEsc = '\033';
constexpr char kBel = '\a';
constexpr const char* kOverrideVar = "H3_TERMINAL_IMAGES";

TerminalSupport supported(TerminalProtocol p, std::string what) { return {p, false, std::move(what)}; }
TerminalSupport unsupported(std::string why) { return {TerminalProtocol::None, false, std::move(why)}; }

// Wraps one escape sequence for tmux's passthrough: DCS "tmux;" <sequence with every ESC doubled> ST.
std::string tmux_wrap(std::string_view seq) {
  std::string out = "\033Ptmux;";
  for (char c : seq) {
    if (c == kEsc) out += kEsc;
    out += c;
  }
  out += "\033\\";
  return out;
}

std::string kitty_sequence(const std::string& b64, int width, int height, const TerminalImageOptions& o) {
  // a=T: transmit and display; f=100: PNG payload; q=2: no replies (they would land in the line editor's
  // input). c/r (columns/rows) only when zooming with a known cell size: kitty scales the image to fill them.
  std::string keys = "a=T,f=100,q=2";
  if (o.zoom != 1 && o.cell_width_px > 0 && o.cell_height_px > 0) {
    const long cols = std::max(1L, std::lround(static_cast<double>(width) * o.zoom / o.cell_width_px));
    const long rows = std::max(1L, std::lround(static_cast<double>(height) * o.zoom / o.cell_height_px));
    keys += cat(",c=", cols, ",r=", rows);
  }
  std::string out;
  size_t pos = 0;
  do {
    const size_t n = std::min(kKittyChunkChars, b64.size() - pos);
    const bool more = pos + n < b64.size();
    std::string seq = "\033_G";
    if (pos == 0) seq += keys + ",";
    seq += more ? "m=1;" : "m=0;";
    seq.append(b64, pos, n);
    seq += "\033\\";
    out += o.tmux_passthrough ? tmux_wrap(seq) : seq;
    pos += n;
  } while (pos < b64.size());
  return out;
}

std::string iterm2_sequence(const std::string& b64, size_t png_bytes, int width, int height,
                            const TerminalImageOptions& o) {
  std::string seq = cat("\033]1337;File=inline=1;size=", png_bytes, ";width=", static_cast<long long>(width) * o.zoom,
                        "px;height=", static_cast<long long>(height) * o.zoom, "px;preserveAspectRatio=1:");
  seq += b64;
  seq += kBel;
  return o.tmux_passthrough ? tmux_wrap(seq) : seq;
}

void write_fully(int fd, const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    H3_CHECK(n > 0, "cannot write the image to the terminal: ", n < 0 ? std::strerror(errno) : "short write");
    p += n;
    left -= static_cast<size_t>(n);
  }
}

TerminalImageOptions options_for(int fd, const TerminalSupport& support, int zoom) {
  H3_CHECK(zoom >= 1 && zoom <= 16, "the terminal zoom must be in [1, 16] (got ", zoom, ")");
  TerminalImageOptions o;
  o.zoom = zoom;
  o.tmux_passthrough = support.tmux_passthrough;
  winsize ws{};
  if (fd >= 0 && ::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    o.cell_width_px = ws.ws_xpixel / ws.ws_col;  // 0 when the terminal does not report pixels
    o.cell_height_px = ws.ws_ypixel / ws.ws_row;
  }
  return o;
}

}  // namespace

const char* terminal_protocol_name(TerminalProtocol p) {
  switch (p) {
    case TerminalProtocol::Kitty: return "kitty graphics";
    case TerminalProtocol::Iterm2: return "iTerm2 inline images";
    case TerminalProtocol::None: break;
  }
  return "none";
}

TerminalSupport detect_terminal(const EnvLookup& getenv_fn) {
  auto env = [&](const char* name) -> std::string_view {
    const char* v = getenv_fn(name);
    return v ? std::string_view(v) : std::string_view();
  };
  auto set = [&](const char* name) { return getenv_fn(name) != nullptr; };
  const std::string_view term = env("TERM"), program = env("TERM_PROGRAM");
  const bool in_tmux = set("TMUX") || program == "tmux" || term.starts_with("tmux");
  const bool in_screen = !in_tmux && (set("STY") || term.starts_with("screen"));

  if (const std::string_view forced = env(kOverrideVar); !forced.empty()) {
    TerminalSupport s;
    if (forced == "kitty")
      s = supported(TerminalProtocol::Kitty, cat(kOverrideVar, "=kitty"));
    else if (forced == "iterm2")
      s = supported(TerminalProtocol::Iterm2, cat(kOverrideVar, "=iterm2"));
    else if (forced == "none")
      return unsupported(cat(kOverrideVar, "=none"));
    else
      return unsupported(cat(kOverrideVar, "=", forced, " is not one of kitty, iterm2, none"));
    s.tmux_passthrough = in_tmux;
    if (in_tmux) s.description += " through tmux passthrough";
    return s;
  }
  if (in_tmux || in_screen)
    return unsupported(cat("inline images are off inside ", in_tmux ? "tmux" : "GNU screen", " (set ", kOverrideVar,
                           "=kitty or iterm2 to force them", in_tmux ? ", with tmux's allow-passthrough on" : "", ")"));

  // TERM_PROGRAM names the terminal actually running us; check it before variables a child terminal
  // may have inherited (KITTY_WINDOW_ID, LC_TERMINAL, ...).
  if (program == "ghostty" || term == "xterm-ghostty") return supported(TerminalProtocol::Kitty, "Ghostty");
  if (program == "iTerm.app") return supported(TerminalProtocol::Iterm2, "iTerm2");
  if (program == "WezTerm") return supported(TerminalProtocol::Iterm2, "WezTerm");
  if (term == "xterm-kitty" || set("KITTY_WINDOW_ID")) return supported(TerminalProtocol::Kitty, "kitty");
  if (set("GHOSTTY_RESOURCES_DIR")) return supported(TerminalProtocol::Kitty, "Ghostty");
  if (env("LC_TERMINAL") == "iTerm2") return supported(TerminalProtocol::Iterm2, "iTerm2");
  if (set("KONSOLE_VERSION")) return supported(TerminalProtocol::Iterm2, "Konsole");
  return unsupported("this terminal shows no inline images (kitty, Ghostty, iTerm2, WezTerm and Konsole do)");
}

TerminalSupport detect_terminal() {
  return detect_terminal([](const char* name) -> const char* { return std::getenv(name); });
}

std::string base64_encode(const uint8_t* data, size_t size) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (const size_t rest = size - i; rest > 0) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (rest == 2 ? uint32_t{data[i + 1]} << 8 : 0);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string terminal_image_sequence(TerminalProtocol protocol, const std::vector<uint8_t>& png, int width,
                                    int height, const TerminalImageOptions& options) {
  H3_CHECK(width > 0 && height > 0, "a terminal image needs at least 1x1 pixels (got ", width, "x", height, ")");
  H3_CHECK(options.zoom >= 1 && options.zoom <= 16, "the terminal zoom must be in [1, 16] (got ", options.zoom, ")");
  H3_CHECK(!png.empty(), "the terminal image has no PNG data");
  const std::string b64 = base64_encode(png.data(), png.size());
  switch (protocol) {
    case TerminalProtocol::Kitty: return kitty_sequence(b64, width, height, options);
    case TerminalProtocol::Iterm2: return iterm2_sequence(b64, png.size(), width, height, options);
    case TerminalProtocol::None: break;
  }
  fail("this terminal has no inline image protocol (kitty graphics or iTerm2 inline images)");
}

std::string terminal_image_sequence(TerminalProtocol protocol, const Rgb8Image& image,
                                    const TerminalImageOptions& options) {
  return terminal_image_sequence(protocol, encode_png(image), image.width, image.height, options);
}

void write_terminal_image(int fd, const TerminalSupport& support, const Rgb8Image& image, int zoom) {
  const TerminalImageOptions o = options_for(fd, support, zoom);
  write_fully(fd, terminal_image_sequence(support.protocol, image, o) + "\n");
}

void write_terminal_image(std::FILE* out, const TerminalSupport& support, const Rgb8Image& image, int zoom) {
  H3_CHECK(out != nullptr, "no terminal stream to write the image to");
  const TerminalImageOptions o = options_for(::fileno(out), support, zoom);
  const std::string seq = terminal_image_sequence(support.protocol, image, o) + "\n";
  H3_CHECK(std::fwrite(seq.data(), 1, seq.size(), out) == seq.size() && std::fflush(out) == 0,
           "cannot write the image to the terminal: ", std::strerror(errno));
}

}  // namespace h3
