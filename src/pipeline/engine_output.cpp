// Writing a generation's result (kept apart from the engine so that binaries without FFmpeg can link the engine).
#include "h3/h3.h"
#include "media/mp4_writer.h"
#include "media/video_frames.h"
#include "pipeline/generation_metadata.h"
#include "util/output_file.h"

namespace h3 {

void write_generation_mp4(const std::string& path, const GenerationResult& result) {
  write_generation_mp4(path, rgb8_from_tensor(result.video), result);
}

void write_generation_mp4(const std::string& path, const Rgb8Video& v, const GenerationResult& result) {
  OutputFile out(path);
  write_generation_mp4(out, v, result);
  out.commit();
}

void write_generation_mp4(OutputFile& out, const Rgb8Video& v, const GenerationResult& result) {
  Mp4Options o;
  o.fps = static_cast<int>(result.fps);
  o.audio_sample_rate = static_cast<int>(result.sample_rate);
  o.metadata = generation_metadata(result.request);
  const int64_t samples = result.audio.defined() ? result.audio.dim(1) : 0;
  write_mp4(out, v, samples ? result.audio.ptr<float>() : nullptr, samples, o);
}

}  // namespace h3
