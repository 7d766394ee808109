#include "backend/cuda_arch.h"

#include <algorithm>
#include <cstdlib>

#include "util/env.h"
#include "util/error.h"

namespace h3 {

namespace {

std::string capability(int major, int minor) { return cat(major, ".", minor); }

std::string names_of(const std::vector<CudaArch>& archs) {
  std::string s;
  for (const CudaArch& a : archs) s += cat(s.empty() ? "" : ", ", a.name);
  return s;
}

// One entry: sm_N, sm_Na or compute_N with N = 10·major + minor (two or three digits).
CudaArch parse_one(const std::string& entry) {
  CudaArch a;
  a.name = entry;
  std::string rest;
  if (entry.rfind("sm_", 0) == 0) {
    rest = entry.substr(3);
  } else if (entry.rfind("compute_", 0) == 0) {
    a.ptx = true;
    rest = entry.substr(8);
  }
  if (!rest.empty() && rest.back() == 'a') {
    a.specific = true;
    rest.pop_back();
  }
  const bool digits =
      (rest.size() == 2 || rest.size() == 3) && rest.find_first_not_of("0123456789") == std::string::npos;
  H3_CHECK(digits, "CUDA architecture '", entry, "' is not sm_N, sm_Na or compute_N (N: 10·major + minor, e.g. sm_86)");
  a.number = std::atoi(rest.c_str());
  return a;
}

}  // namespace

bool CudaArch::runs_on(int major, int minor) const {
  const int device = 10 * major + minor;
  if (specific) return device == number;  // arch-specific code (sm_90a's wgmma, TMA): that capability only
  if (ptx) return device >= number;       // PTX: compiled by the driver for its own or any newer capability
  return major == number / 10 && minor >= number % 10;  // device code: the same major, the same or a newer minor
}

std::vector<CudaArch> parse_cuda_archs(const std::string& list) {
  std::vector<CudaArch> out;
  if (list.empty()) return out;
  for (size_t at = 0;;) {
    const size_t end = std::min(list.find(',', at), list.size());
    out.push_back(parse_one(list.substr(at, end - at)));
    if (end == list.size()) return out;
    at = end + 1;
  }
}

std::string CudaPaths::describe() const {
  if (!refusal.empty()) return "none: " + refusal;
  return hopper_kernels ? "h3's Hopper kernels (sm_90a) with the portable ones"
                        : cat("portable kernels (", why_portable, ")");
}

CudaPaths choose_cuda_paths(const std::string& gpu, int major, int minor, const std::vector<CudaArch>& built,
                            const std::string& forced_by) {
  CudaPaths p;
  const std::string cc = capability(major, minor);
  if (10 * major + minor < 10 * kMinCudaMajor + kMinCudaMinor) {
    p.refusal = cat(gpu, " has compute capability ", cc, "; h3 supports ", capability(kMinCudaMajor, kMinCudaMinor),
                    " (Ampere) and newer: bf16 tensor cores");
    return p;
  }
  bool loads = false, hopper_code = false;
  for (const CudaArch& a : built) {
    loads = loads || a.runs_on(major, minor);
    hopper_code = hopper_code || (a.name == "sm_90a");
  }
  if (!loads) {
    p.refusal = cat(gpu, " has compute capability ", cc, ", for which this build of h3 has no code (it holds ",
                    names_of(built), "; h3 supports ", capability(kMinCudaMajor, kMinCudaMinor),
                    " and newer: rebuild with ", 10 * major + minor, " in -DH3_CUDA_ARCHITECTURES)");
    return p;
  }
  if (!forced_by.empty())
    p.why_portable = cat(forced_by, "=1");
  else if (major != 9 || minor != 0)
    p.why_portable = cat("compute capability ", cc, ": our Hopper kernels need 9.0");
  else if (!hopper_code)
    p.why_portable = "this build has no sm_90a code";
  p.hopper_kernels = p.why_portable.empty();
  return p;
}

std::string cuda_portable_switch() {
  for (const char* name : {kForcePortableVar, kDisableHopperKernelsVar})
    if (env_flag(name)) return name;
  return {};
}

}  // namespace h3
