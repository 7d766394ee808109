// Running the h3 binary in tests (H3_BINARY): a child with its own clean environment and working folder, its
// stdout and stderr collected; a tiny random-weight model made once per test process; the small fast request every
// generating test uses; the files a run leaves.
#pragma once
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace h3_cli_test {

namespace fs = std::filesystem;

using Clock = std::chrono::steady_clock;

// ---- running the binary ----------------------------------------------------------------------------------------

struct Result {
  int status = -1;  // exit status; 128 + signal when killed by one
  std::string out, err;
  double seconds = 0;
};

struct Spec {
  std::vector<std::string> args;
  std::map<std::string, std::string> env;  // on top of a clean PATH/HOME environment
  std::string cwd;
  std::string input;  // written to stdin, which is then closed
};

inline std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// A clean environment (no TMUX, TERM_PROGRAM, ... from the test's own terminal), plus `extra`.
inline std::vector<std::string> environment(const std::map<std::string, std::string>& extra,
                                            const std::string& home) {
  std::map<std::string, std::string> env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", home}};
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

class Child {
 public:
  explicit Child(const Spec& spec) {
    int in[2], out[2], err[2];
    EXPECT_EQ(pipe(in), 0);
    EXPECT_EQ(pipe(out), 0);
    EXPECT_EQ(pipe(err), 0);
    std::vector<std::string> argv = {H3_BINARY};
    argv.insert(argv.end(), spec.args.begin(), spec.args.end());
    std::vector<std::string> envp = environment(spec.env, spec.cwd);
    start_ = Clock::now();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
      if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) _exit(127);
      execve(argv[0].c_str(), c_strings(argv).data(), c_strings(envp).data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    if (!spec.input.empty()) {
      EXPECT_EQ(write(in[1], spec.input.data(), spec.input.size()), (ssize_t)spec.input.size());
    }
    close(in[1]);
  }

  // Reads until stderr contains `needle` (true) or the streams close / the time runs out (false).
  bool wait_for_stderr(const std::string& needle, double timeout_s = 60) {
    const auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (r_.err.find(needle) == std::string::npos && Clock::now() < end)
      if (!pump(100)) break;
    return r_.err.find(needle) != std::string::npos;
  }

  void signal(int sig) { kill(pid_, sig); }
  pid_t pid() const { return pid_; }

  Result finish() {
    while (pump(1000)) {
    }
    int st = 0;
    waitpid(pid_, &st, 0);
    r_.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return r_;
  }

 private:
  // One poll round; false once both streams are closed.
  bool pump(int timeout_ms) {
    std::vector<pollfd> fds;
    if (out_fd_ >= 0) fds.push_back({out_fd_, POLLIN, 0});
    if (err_fd_ >= 0) fds.push_back({err_fd_, POLLIN, 0});
    if (fds.empty()) return false;
    if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return true;
    for (const pollfd& p : fds) {
      if (!(p.revents & (POLLIN | POLLHUP))) continue;
      char buf[65536];
      const ssize_t n = read(p.fd, buf, sizeof buf);
      int& fd = p.fd == out_fd_ ? out_fd_ : err_fd_;
      std::string& dst = p.fd == out_fd_ ? r_.out : r_.err;
      if (n <= 0) {
        close(fd);
        fd = -1;
      } else {
        dst.append(buf, static_cast<size_t>(n));
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  Result r_;
  Clock::time_point start_;
};

inline Result run(const Spec& spec) { return Child(spec).finish(); }

// A fresh, empty working folder per test.
inline std::string work_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("h3_cli_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

inline const std::string& tiny_model() {
  static const std::string dir = [] {
    const std::string d = (fs::temp_directory_path() / ("h3_cli_tiny_" + std::to_string(getpid()))).string();
    fs::remove_all(d);
    Result r = run({{"tool", "make-tiny-model", d}, {}, fs::temp_directory_path().string(), ""});
    EXPECT_EQ(r.status, 0) << r.err;
    return d;
  }();
  return dir;
}

// The small, fast request every generating test uses (22 frames = one video VAE chunk and a bit). On the CPU, so
// the tests behave the same with and without a GPU (a GPU would finish the "long" cancel runs too quickly).
inline std::vector<std::string> small(std::vector<std::string> extra) {
  std::vector<std::string> a = {"-d",     tiny_model(), "--device", "cpu", "--width", "64", "--height", "64",
                                "--frames", "22",        "--steps",  "2"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

}  // namespace h3_cli_test
