// Test helper: `h3 serve` as a child process on a free loopback port, with its stdout and stderr in files of `dir`.
#pragma once
#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "util/error.h"

extern char** environ;

namespace h3 {

class ServerProcess {
 public:
  // Starts `h3 serve --port 0 ARGS...` and waits (up to `timeout_s`) for its "listening on" line.
  ServerProcess(const std::string& dir, const std::vector<std::string>& args, double timeout_s = 60) {
    static int launches = 0;
    const int n = ++launches;
    out_ = cat(dir, "/serve-", n, ".out");
    err_ = cat(dir, "/serve-", n, ".err");
    std::vector<std::string> argv = {H3_BINARY, "serve", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&pid_, cargv[0], &actions, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    H3_CHECK(rc == 0, "cannot start ", H3_BINARY);
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    std::smatch m;
    for (;;) {
      const std::string out = read(out_);
      if (std::regex_search(out, m, listening)) break;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        fail("h3 serve exited before listening: ", read(err_));
      }
      if (std::chrono::steady_clock::now() > end) fail("h3 serve did not listen in time: ", read(err_));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    port_ = std::stoi(m[1]);
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  std::string stderr_text() const { return read(err_); }
  void signal(int sig) const { ::kill(pid_, sig); }
  // Waits for the process to end; its exit status, or 128 + the signal that ended it.
  int wait() {
    int status = 0;
    if (pid_ <= 0 || waitpid(pid_, &status, 0) != pid_) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  pid_t pid_ = -1;
  int port_ = 0;
  std::string out_, err_;
};

}  // namespace h3
