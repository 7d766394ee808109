// `h3 serve` as a process on loopback with the tiny e2e model: a bounded load (every job accounted for in the
// database, the queue limit honoured), kill -9 during a job and the restart (the job queued again, then failed after
// its second start; a finished video still served; nothing partial), SIGTERM (the running job queued again, exit 0),
// and the preview and the cancel of a running job. The openai npm client's test is tests/server/.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "server/job_store.h"
#include "server_process.h"
#include "temp_dir.h"
#include "test_source_dir.h"

namespace h3::server {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string model_dir() { return test_source_dir() + "/tests/fixtures/e2e/model"; }

// A video of the tiny model at a tiny canvas: a fraction of a second.
constexpr const char* kQuickVideo = R"({"prompt": "a fox", "size": "16x8", "frames": 22, "steps": 2})";
// Long enough (seconds of passes) to be caught running.
constexpr const char* kLongVideo = R"({"prompt": "a fox", "size": "64x32", "frames": 22, "steps": 1000})";

struct Client {
  explicit Client(int port) : http("127.0.0.1", port) { http.set_read_timeout(30); }
  httplib::Result post(const std::string& body) { return http.Post("/v1/videos", body, "application/json"); }
  json get_json(const std::string& path) {
    httplib::Result r = http.Get(path);
    EXPECT_TRUE(r) << path;
    return r ? json::parse(r->body) : json();
  }
  std::string submit(const std::string& body) {
    httplib::Result r = post(body);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return r && r->status == 200 ? json::parse(r->body)["id"].get<std::string>() : "";
  }
  // Polls the video until `done(video)`; false when `timeout_s` passes first.
  template <typename F>
  bool wait_for(const std::string& id, F&& done, double timeout_s = 60) {
    const auto end = Clock::now() + std::chrono::duration<double>(timeout_s);
    while (Clock::now() < end) {
      if (done(get_json("/v1/videos/" + id))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  httplib::Client http;
};

bool has_status(const json& v, const char* status) { return v.value("status", "") == status; }
bool denoising(const json& v) { return has_status(v, "in_progress") && v.value("phase", json()) == "denoise"; }

std::vector<std::string> partial_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".partial-") != std::string::npos) out.push_back(e.path().string());
  return out;
}

struct ServerProcessTest : ::testing::Test {
  TempDir dir{"serve"};
  std::string data() const { return dir / "data"; }
  std::vector<std::string> args(std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = {"-d", model_dir(), "--device", "cpu", "--data-dir", data()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

TEST_F(ServerProcessTest, BoundedLoadKeepsTheQueueLimitAndRecordsEveryJob) {
  constexpr int kConnections = 8, kPerConnection = 25;
  constexpr int64_t kMaxQueue = 6;
  ServerProcess server(dir.path(), args({"--max-queue", std::to_string(kMaxQueue)}));
  std::mutex m;
  std::set<std::string> accepted;
  int refused = 0, other = 0;
  std::string refusal;
  std::atomic<bool> done{false};
  std::atomic<int64_t> most_queued{0};
  // The queue length as /metrics reports it, sampled while the load runs.
  std::thread sampler([&] {
    Client c(server.port());
    while (!done) {
      if (httplib::Result r = c.http.Get("/metrics")) {
        const size_t at = r->body.find("\nh3_queue_length ");
        if (at != std::string::npos) {
          const int64_t q = std::stoll(r->body.substr(at + 17));
          most_queued = std::max<int64_t>(most_queued, q);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::vector<std::thread> clients;
  for (int t = 0; t < kConnections; ++t)
    clients.emplace_back([&] {
      Client c(server.port());  // one keep-alive connection per thread
      for (int i = 0; i < kPerConnection; ++i) {
        httplib::Result r = c.post(kQuickVideo);
        std::lock_guard lock(m);
        if (r && r->status == 200) {
          accepted.insert(json::parse(r->body)["id"].get<std::string>());
        } else if (r && r->status == 429) {
          ++refused;
          refusal = json::parse(r->body)["error"]["message"];
        } else {
          ++other;
        }
      }
    });
  for (std::thread& t : clients) t.join();
  done = true;
  sampler.join();
  std::printf("[ load ] %zu accepted, %d refused (429), at most %lld queued\n", accepted.size(), refused,
              static_cast<long long>(most_queued.load()));
  EXPECT_EQ(other, 0);
  EXPECT_EQ(static_cast<int>(accepted.size()) + refused, kConnections * kPerConnection);
  EXPECT_GT(refused, 0) << "the load never filled the queue";
  EXPECT_EQ(refusal, "The queue is full (at most 6 videos wait to start); try again later.");
  EXPECT_LE(most_queued, kMaxQueue);
  // The server still serves, then stops on SIGTERM.
  Client c(server.port());
  EXPECT_EQ(c.get_json("/healthz")["status"], "ok");
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(), 0) << server.stderr_text();

  // Every accepted job is in the database, and nothing else.
  JobStore store(data() + "/jobs.sqlite3");
  ListQuery all;
  all.limit = kMaxListLimit;
  std::set<std::string> recorded;
  for (;;) {
    const JobStore::Page page = *store.list(all);
    for (const Job& j : page.jobs) {
      recorded.insert(j.id);
      EXPECT_TRUE(j.status == JobStatus::Queued || j.status == JobStatus::Completed) << job_status_name(j.status);
    }
    if (!page.has_more) break;
    all.after = page.jobs.back().id;
  }
  EXPECT_EQ(recorded, accepted);
  // At most the queue's limit waited; the SIGTERM above queues the job it stopped again (as it should: see
  // SigtermQueuesTheRunningJobAgainAndDeleteCancelsIt), so after the stop one more may be queued than the limit.
  EXPECT_LE(store.count_by_status()[JobStatus::Queued], kMaxQueue + 1);
  for (const std::string& id : accepted)
    if (store.get(id)->status == JobStatus::Completed) {
      const std::optional<JobFile> video = store.file(id, "video");
      ASSERT_TRUE(video) << id;
      EXPECT_EQ(static_cast<int64_t>(fs::file_size(fs::path(data()) / "jobs" / id / video->name)), video->bytes);
    }
}

TEST_F(ServerProcessTest, KillDuringAJobQueuesItAgainThenFailsItAndFinishedVideosStillServe) {
  std::string finished, finished_mp4, long_job;
  {
    ServerProcess server(dir.path(), args());
    Client c(server.port());
    finished = c.submit(kQuickVideo);
    ASSERT_TRUE(c.wait_for(finished, [](const json& v) { return has_status(v, "completed"); }));
    finished_mp4 = c.http.Get("/v1/videos/" + finished + "/content")->body;
    ASSERT_GT(finished_mp4.size(), 1000u);
    long_job = c.submit(kLongVideo);
    ASSERT_TRUE(c.wait_for(long_job, denoising));
    server.signal(SIGKILL);
    EXPECT_EQ(server.wait(), 128 + SIGKILL);
  }
  {
    JobStore store(data() + "/jobs.sqlite3");  // what the killed server left, before a restart settles it
    EXPECT_EQ(store.get(long_job)->status, JobStatus::InProgress);
    EXPECT_FALSE(store.file(long_job, "video"));
  }
  {
    ServerProcess server(dir.path(), args());
    EXPECT_NE(server.stderr_text().find(long_job + ": queued again (the server stopped while it ran)"),
              std::string::npos)
        << server.stderr_text();
    Client c(server.port());
    // The finished video is served as it was; the interrupted one has no content, and runs again.
    httplib::Result mp4 = c.http.Get("/v1/videos/" + finished + "/content");
    ASSERT_TRUE(mp4);
    EXPECT_EQ(mp4->status, 200);
    EXPECT_TRUE(mp4->body == finished_mp4);
    httplib::Result none = c.http.Get("/v1/videos/" + long_job + "/content");
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 409);
    EXPECT_EQ(json::parse(none->body)["error"]["code"], "video_not_ready");
    ASSERT_TRUE(c.wait_for(long_job, denoising));
    EXPECT_EQ(partial_files(data()).size(), 0u);
    server.signal(SIGKILL);
    server.wait();
  }
  ServerProcess server(dir.path(), args());
  Client c(server.port());
  const json v = c.get_json("/v1/videos/" + long_job);
  EXPECT_EQ(v["status"], "failed");
  EXPECT_EQ(v["error"]["code"], "server_stopped");
  EXPECT_EQ(v["error"]["message"],
            "The server stopped while running this job 2 times (killed or crashed, e.g. out of memory); it is not "
            "started again.");
  EXPECT_EQ(c.http.Get("/v1/videos/" + long_job + "/content")->status, 409);
  EXPECT_EQ(c.http.Get("/v1/videos/" + finished + "/content")->status, 200);
  EXPECT_FALSE(fs::exists(fs::path(data()) / "jobs" / long_job / "video.mp4"));
  EXPECT_EQ(partial_files(data()).size(), 0u);
}

TEST_F(ServerProcessTest, SigtermQueuesTheRunningJobAgainAndDeleteCancelsIt) {
  std::string id;
  {
    ServerProcess server(dir.path(), args());
    Client c(server.port());
    id = c.submit(kLongVideo);
    ASSERT_TRUE(c.wait_for(id, denoising));
    // A preview: the pass after the first request decodes one.
    httplib::Result first = c.http.Get("/v1/videos/" + id + "/preview");
    ASSERT_TRUE(first);
    if (first->status != 200) {
      EXPECT_EQ(first->status, 409);
      EXPECT_EQ(json::parse(first->body)["error"]["code"], "preview_not_ready");
    }
    httplib::Result png = c.http.Get("/v1/videos/" + id + "/preview");
    for (int i = 0; i < 500 && (!png || png->status != 200); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      png = c.http.Get("/v1/videos/" + id + "/preview");
    }
    ASSERT_TRUE(png && png->status == 200);
    EXPECT_EQ(png->get_header_value("Content-Type"), "image/png");
    EXPECT_EQ(png->body.substr(1, 3), "PNG");
    EXPECT_NE(png->get_header_value("X-H3-Preview-Pass").find("/1000"), std::string::npos);
    const auto stop = Clock::now();
    server.signal(SIGTERM);
    EXPECT_EQ(server.wait(), 0) << server.stderr_text();
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - stop).count(), 10.0);
    EXPECT_NE(server.stderr_text().find(id + " queued again (the server is stopping)"), std::string::npos)
        << server.stderr_text();
  }
  {
    JobStore store(data() + "/jobs.sqlite3");
    const Job j = *store.get(id);
    EXPECT_EQ(j.status, JobStatus::Queued);
    EXPECT_EQ(j.starts, 0);  // a stop on request does not count against the job
  }
  ServerProcess server(dir.path(), args());
  Client c(server.port());
  ASSERT_TRUE(c.wait_for(id, denoising));
  httplib::Result del = c.http.Delete("/v1/videos/" + id);
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200);
  EXPECT_EQ(json::parse(del->body)["deleted"], false);  // cancelled first, deleted by a second DELETE
  ASSERT_TRUE(c.wait_for(id, [](const json& v) { return has_status(v, "cancelled"); }, 30));
  del = c.http.Delete("/v1/videos/" + id);
  EXPECT_EQ(json::parse(del->body)["deleted"], true);
  EXPECT_EQ(c.http.Get("/v1/videos/" + id)->status, 404);
  EXPECT_FALSE(fs::exists(fs::path(data()) / "jobs" / id));
}

// FastH3's request fields through the HTTP API: the sparse attention selected for the tiny (gate-less) checkpoint
// runs pure VSA-H3 to a finished video; a sparsity without the sparse attention, and an unknown attention, are
// answered 400 with the engine's and the parser's sentences before anything is queued.
TEST_F(ServerProcessTest, SparseAttentionRequestsRunAndImpossibleOnesAreRefused) {
  ServerProcess server(dir.path(), args());
  Client c(server.port());
  for (const auto& [body, sentence] :
       {std::pair{R"({"prompt": "a fox", "sparsity": 0.5})",
                  "--sparsity and the VSA tile size need the sparse attention"},
        std::pair{R"({"prompt": "a fox", "attention": "fast"})", "\"attention\" must be \"dense\" or \"sparse\""}}) {
    httplib::Result r = c.post(body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find(sentence), std::string::npos) << r->body;
  }
  const std::string id = c.submit(
      R"({"prompt": "a fox", "size": "16x8", "frames": 22, "steps": 2, "attention": "sparse", "sparsity": 0.5})");
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(c.wait_for(id, [](const json& v) { return has_status(v, "completed") || has_status(v, "failed"); }));
  EXPECT_TRUE(has_status(c.get_json("/v1/videos/" + id), "completed")) << c.get_json("/v1/videos/" + id).dump();
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(), 0) << server.stderr_text();
  // The job kept the request's FastH3 fields; the refused requests left no job.
  JobStore store(data() + "/jobs.sqlite3");
  const json kept = json::parse(store.get(id)->request);
  EXPECT_EQ(kept["attention"], "sparse");
  EXPECT_EQ(kept["sparsity"], 0.5);
  int64_t jobs = 0;
  for (const auto& [status, n] : store.count_by_status()) jobs += n;
  EXPECT_EQ(jobs, 1);
  EXPECT_EQ(store.count_by_status()[JobStatus::Completed], 1);
}

TEST_F(ServerProcessTest, ASecondServerOnTheSameDataFolderIsRefused) {
  ServerProcess first(dir.path(), args());
  try {
    ServerProcess second(dir.path(), args());
    ADD_FAILURE() << "the second server listened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is the data folder of another h3 serve that is running"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace h3::server
