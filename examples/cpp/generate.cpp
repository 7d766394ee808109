// libh3 from C++: one video from a prompt, then a second with another seed (the model stays loaded and the prompt
// stays encoded).
//   h3_cpp_example MODEL_DIR OUTPUT.mp4 PROMPT [WIDTH HEIGHT FRAMES STEPS]
// Build: c++ -std=c++20 generate.cpp $(pkg-config --cflags --libs h3)   or, with CMake, link h3::h3 or
// h3::h3_static (examples/CMakeLists.txt).
#include <h3/h3.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4 && argc != 8) {
    std::fprintf(stderr, "usage: %s MODEL_DIR OUTPUT.mp4 PROMPT [WIDTH HEIGHT FRAMES STEPS]\n", argv[0]);
    return 2;
  }
  try {
    std::printf("%s", h3::build_info_text().c_str());
    auto engine = h3::Engine::open({.model_dir = argv[1]});
    h3::GenerationRequest request;
    request.prompt = argv[3];
    if (argc == 8) {
      request.width = std::stoll(argv[4]);
      request.height = std::stoll(argv[5]);
      request.frames = std::stoll(argv[6]);
      request.steps = std::stoll(argv[7]);
    }
    h3::GenerateCallbacks callbacks;
    callbacks.on_progress = [](const h3::ProgressEvent& e) {
      std::fprintf(stderr, "%s %lld/%lld\n", h3::phase_name(e.phase), static_cast<long long>(e.done),
                   static_cast<long long>(e.total));
    };
    const h3::GenerationResult first = engine->generate(request, callbacks);
    h3::write_generation_mp4(argv[2], first);
    request.seed += 1;
    const h3::GenerationResult second = engine->generate(request);
    std::printf("wrote %s: %lldx%lld, %lld frames; a second video with seed %llu: prompt cached %s\n", argv[2],
                static_cast<long long>(first.video.dim(3)), static_cast<long long>(first.video.dim(2)),
                static_cast<long long>(first.video.dim(1)),
                static_cast<unsigned long long>(second.request.request.seed), second.prompt_cache_hit ? "yes" : "no");
    return 0;
  } catch (const h3::Error& e) {
    std::fprintf(stderr, "h3: %s\n", e.what());
    return 1;
  }
}
