#include "server/http_server.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "h3/h3.h"
#include "pipeline/geometry.h"
#include "pipeline/request_json.h"
#include "server/job_runner.h"
#include "server/job_store.h"
#include "server/video_request.h"
#include "util/output_file.h"

namespace h3::server {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using httplib::Request;
using httplib::Response;

constexpr const char* kIdPattern = "([^/]+)";
constexpr size_t kMaxFormParts = 64;
constexpr time_t kKeepAliveSeconds = 2;
// Connections served at once: each open keep-alive connection holds one of the library's worker threads (its default
// pool is max(8, cores − 1)), so a ninth busy client would wait for another's connection to close.
constexpr size_t kHttpWorkers = 64;
constexpr const char* kRoutes =
    "POST /v1/videos, GET /v1/videos, GET|DELETE /v1/videos/{id}, GET /v1/videos/{id}/content, "
    "GET /v1/videos/{id}/preview, GET /healthz, GET /metrics";

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "video_" and 128 random bits in hex: ids cannot be guessed from one another.
std::string new_job_id() {
  std::random_device rd;
  char hex[33];
  for (int i = 0; i < 4; ++i) std::snprintf(hex + 8 * i, 9, "%08x", static_cast<unsigned>(rd()));
  return cat("video_", hex);
}

// A seed for a request without one, below 2^53 so that a JavaScript client reads the reported seed exactly.
uint64_t draw_seed() {
  std::random_device rd;
  return ((static_cast<uint64_t>(rd()) << 32) ^ rd()) & ((uint64_t{1} << 53) - 1);
}

void send_json(Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// OpenAI's error object.
void send_error(Response& res, int status, const std::string& code, const std::string& message) {
  send_json(res, status,
            {{"error",
              {{"message", message},
               {"type", status >= 500 ? "server_error" : "invalid_request_error"},
               {"param", nullptr},
               {"code", code}}}});
}

std::string duration_text(int64_t frames) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(frames) / static_cast<double>(kFps));
  return buf;
}

bool starts_with_ci(const std::string& s, std::string_view prefix) {
  return s.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), s.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         });
}

// Equal strings, in a time that does not depend on where they differ (the API key).
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot read the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// cpp-httplib 0.11.4 answers a byte range itself, but passes a range that ends past the body, or a suffix range
// longer than it, through unclamped (a wrong Content-Range header). The ranges are made explicit and clamped to
// `size` here (RFC 9110 §14.1.2), the unsatisfiable ones dropped; false when none is left. The library's Request
// is a local object of its connection loop, handed to handlers as const: changing it is well defined.
bool clamp_ranges(const Request& req, size_t size) {
  auto& ranges = const_cast<httplib::Ranges&>(req.ranges);
  const auto n = static_cast<ssize_t>(size);
  httplib::Ranges kept;
  for (auto [first, last] : ranges) {
    if (first < 0 && last < 0) continue;
    if (first < 0) {
      first = std::max<ssize_t>(0, n - last);
      last = n - 1;
    } else if (last < 0 || last >= n) {
      last = n - 1;
    }
    if (first < n && first <= last) kept.emplace_back(first, last);
  }
  const bool satisfiable = ranges.empty() || !kept.empty();
  ranges = std::move(kept);
  return satisfiable;
}

// The folder of a submission until it is recorded: removed when the submission is refused.
class PendingFolder {
 public:
  explicit PendingFolder(std::string path) : path_(std::move(path)) { fs::create_directory(path_); }
  ~PendingFolder() {
    std::error_code ec;
    if (!kept_) fs::remove_all(path_, ec);
  }
  void keep() { kept_ = true; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool kept_ = false;
};

// The data folder, held with an exclusive lock for as long as this server runs.
class DataFolderLock {
 public:
  explicit DataFolderLock(const std::string& dir) {
    const std::string path = (fs::path(dir) / "lock").string();
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(path, ": cannot open the data folder's lock file");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fail(dir, " is the data folder of another h3 serve that is running; give this one its own --data-dir.");
    }
  }
  ~DataFolderLock() { ::close(fd_); }

 private:
  int fd_ = -1;
};

}  // namespace

struct Server::Impl {
  ServerOptions options;
  std::string model_name;
  std::string jobs_dir;
  std::unique_ptr<DataFolderLock> lock;
  std::unique_ptr<JobStore> store;
  std::unique_ptr<Engine> engine;
  // Submissions are checked by an engine of their own (configs and tokenizer only, no weights), so that a check
  // never waits for, or races with, the generation running on `engine`.
  std::unique_ptr<Engine> validator;
  std::mutex validator_mutex;
  std::unique_ptr<JobRunner> runner;
  httplib::Server http;
  int port = 0;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> serving_ended{false};

  explicit Impl(const ServerOptions& o);
  void open_data_folder();
  void tidy_job_folders();
  void add_routes();

  json video_json(const Job& j) const;
  void submit(const Request& req, Response& res, const httplib::ContentReader& reader);
  void retrieve(const Request& req, Response& res);
  void list(const Request& req, Response& res);
  void content(const Request& req, Response& res);
  void preview(const Request& req, Response& res);
  void remove(const Request& req, Response& res);
  void metrics(Response& res);
  // The job of the route's id, or a 404 answer (nothing).
  std::optional<Job> job_or_404(const Request& req, Response& res) const;
};

Server::Impl::Impl(const ServerOptions& o) : options(o) {
  model_name = fs::path(o.model_dir).lexically_normal().filename().string();
  if (model_name.empty()) model_name = fs::path(o.model_dir).lexically_normal().parent_path().filename().string();
  open_data_folder();
  engine = Engine::open({.model_dir = o.model_dir, .device = o.device});
  validator = Engine::open({.model_dir = o.model_dir, .device = "cpu"});
  runner = std::make_unique<JobRunner>(*engine, *store, jobs_dir);
  add_routes();
  if (o.port == 0) {
    port = http.bind_to_any_port(o.host);
    if (port < 0) fail("cannot listen on ", o.host, " (is it an address of this machine?)");
  } else {
    if (!http.bind_to_port(o.host, o.port))
      fail("cannot listen on ", o.host, ":", o.port, " (is the port in use, or the address not this machine's?)");
    port = o.port;
  }
}

void Server::Impl::open_data_folder() {
  fs::create_directories(options.data_dir);
  lock = std::make_unique<DataFolderLock>(options.data_dir);
  jobs_dir = (fs::path(options.data_dir) / "jobs").string();
  fs::create_directories(jobs_dir);
  store = std::make_unique<JobStore>((fs::path(options.data_dir) / "jobs.sqlite3").string());
  for (const std::string& line : store->recover()) std::fprintf(stderr, "h3 serve: %s\n", line.c_str());
  tidy_job_folders();
}

// What a killed server can leave in the job folders: a folder of a submission it had not recorded yet, and the
// temporary file of an MP4 or a thumbnail it was writing (util/output_file.h). Both go.
void Server::Impl::tidy_job_folders() {
  for (const fs::directory_entry& e : fs::directory_iterator(jobs_dir)) {
    const std::string id = e.path().filename().string();
    if (!store->get(id)) {
      fs::remove_all(e.path());
      continue;
    }
    if (!e.is_directory()) continue;
    for (const fs::directory_entry& f : fs::directory_iterator(e.path()))
      if (f.path().filename().string().find(".partial-") != std::string::npos) fs::remove(f.path());
  }
}

json Server::Impl::video_json(const Job& j) const {
  json error = nullptr;
  if (j.error) error = {{"code", j.error->code}, {"message", j.error->message}};
  return {{"id", j.id},
          {"object", "video"},
          {"created_at", j.created_at},
          {"completed_at", j.completed_at ? json(j.completed_at) : json(nullptr)},
          {"expires_at", nullptr},
          {"status", job_status_name(j.status)},
          {"progress", j.progress},
          {"model", model_name},
          {"prompt", j.prompt},
          {"seconds", duration_text(j.frames)},
          {"size", cat(j.width, "x", j.height)},
          {"remixed_from_video_id", nullptr},
          {"error", error},
          // Ours: what runs now, and the settings that reproduce the video.
          {"phase", j.phase.empty() ? json(nullptr) : json(j.phase)},
          {"frames", j.frames},
          {"steps", j.steps},
          {"seed", j.seed}};
}

std::optional<Job> Server::Impl::job_or_404(const Request& req, Response& res) const {
  const std::string id = req.matches[1];
  std::optional<Job> job = store->get(id);
  if (!job) send_error(res, 404, "not_found", cat("There is no video \"", id, "\"."));
  return job;
}

void Server::Impl::add_routes() {
  http.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  http.set_read_timeout(options.timeout_seconds);
  http.set_write_timeout(options.timeout_seconds);
  // An idle keep-alive connection holds one of the library's worker threads, and a stopping server waits for it.
  http.set_keep_alive_timeout(kKeepAliveSeconds);
  http.new_task_queue = [] { return new httplib::ThreadPool(kHttpWorkers); };

  http.set_pre_routing_handler([this](const Request& req, Response& res) -> httplib::Server::HandlerResponse {
    if (!options.api_key.empty()) {
      const std::string auth = req.get_header_value("Authorization");
      if (auth.empty()) {
        send_error(res, 401, "missing_api_key",
                   "This server needs an API key: send the header \"Authorization: Bearer KEY\".");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (!starts_with_ci(auth, "Bearer ") || !same_secret(auth.substr(7), options.api_key)) {
        send_error(res, 401, "invalid_api_key", "The API key in the Authorization header is not this server's.");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    // Only a submission has a body, and only its reader counts a body sent in chunks against the limit.
    const bool submission = req.method == "POST" && req.path == "/v1/videos";
    if (!submission && req.has_header("Transfer-Encoding")) {
      send_error(res, 400, "unexpected_body", cat(req.method, " ", req.path, " takes no request body."));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Answers the library gives without a handler (no route, a malformed request, a body over the limit) in the
  // API's error shape.
  http.set_error_handler(httplib::Server::HandlerWithResponse([this](const Request& req, Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    switch (res.status) {
      case 404: send_error(res, 404, "unknown_route", cat("No route ", req.method, " ", req.path, " (the API: ", kRoutes, ").")); break;
      case 413:
        send_error(res, 413, "body_too_large",
                   cat("The request body is larger than this server takes (", options.max_body_bytes, " bytes)."));
        break;
      case 414: send_error(res, 414, "uri_too_long", "The request's URI is too long."); break;
      case 416: send_error(res, 416, "range_not_satisfiable", "The Range header is malformed."); break;
      default:
        send_error(res, res.status, "bad_request",
                   cat("The HTTP request was refused (status ", res.status, "): a malformed request line, header or "
                       "body."));
    }
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      send_error(res, 500, "server_error", e.what());
    } catch (...) {
      send_error(res, 500, "server_error", "An unknown error stopped the request.");
    }
  });

  http.Get("/healthz", [](const Request&, Response& res) { send_json(res, 200, {{"status", "ok"}}); });
  http.Get("/metrics", [this](const Request&, Response& res) { metrics(res); });
  http.Post("/v1/videos", [this](const Request& req, Response& res, const httplib::ContentReader& reader) {
    submit(req, res, reader);
  });
  http.Get("/v1/videos", [this](const Request& req, Response& res) { list(req, res); });
  http.Get(cat("/v1/videos/", kIdPattern), [this](const Request& req, Response& res) { retrieve(req, res); });
  http.Get(cat("/v1/videos/", kIdPattern, "/content"), [this](const Request& req, Response& res) { content(req, res); });
  http.Get(cat("/v1/videos/", kIdPattern, "/preview"), [this](const Request& req, Response& res) { preview(req, res); });
  http.Delete(cat("/v1/videos/", kIdPattern), [this](const Request& req, Response& res) { remove(req, res); });
}

void Server::Impl::submit(const Request& req, Response& res, const httplib::ContentReader& reader) {
  const std::string type = req.get_header_value("Content-Type");
  const bool multipart = req.is_multipart_form_data();
  if (!multipart && !starts_with_ci(type, "application/json")) {
    send_error(res, 415, "unsupported_media_type",
               cat("A video request is a JSON object (Content-Type: application/json) or a multipart/form-data "
                   "form, got ", type.empty() ? std::string("no Content-Type") : cat("\"", type, "\""), "."));
    return;
  }
  // The body, counted against the limit as it arrives (a body sent in chunks has no length to check first).
  size_t received = 0;
  bool too_large = false, too_many_parts = false;
  auto count = [&](size_t n) {
    received += n;
    too_large = received > static_cast<size_t>(options.max_body_bytes);
    return !too_large;
  };
  std::vector<FormPart> parts;
  std::string body;
  bool read = false;
  if (multipart) {
    read = reader(
        [&](const httplib::MultipartFormData& h) {
          too_many_parts = parts.size() >= kMaxFormParts;
          if (!too_many_parts) parts.push_back({h.name, h.filename, h.content_type, {}});
          return !too_many_parts;
        },
        [&](const char* data, size_t n) {
          if (!count(n)) return false;
          parts.back().content.append(data, n);
          return true;
        });
  } else {
    read = reader([&](const char* data, size_t n) {
      if (!count(n)) return false;
      body.append(data, n);
      return true;
    });
  }
  if (!read) {
    if (too_large || res.status == 413)
      send_error(res, 413, "body_too_large",
                 cat("The request body is larger than this server takes (", options.max_body_bytes, " bytes)."));
    else if (too_many_parts)
      send_error(res, 400, "invalid_request", cat("A video request has at most ", kMaxFormParts, " form parts."));
    else
      send_error(res, 400, "invalid_request",
                 "The request body could not be read: a malformed multipart/form-data body, or one cut short.");
    return;
  }

  VideoSubmission sub;
  try {
    sub = multipart ? parse_video_form(std::move(parts)) : parse_video_json(body);
  } catch (const Error& e) {
    send_error(res, 400, "invalid_request", e.what());
    return;
  }
  const std::string queue_full = cat("The queue is full (at most ", options.max_queue, " videos wait to start); try again later.");
  if (store->count_by_status()[JobStatus::Queued] >= options.max_queue) {
    send_error(res, 429, "queue_full", queue_full);
    return;
  }

  const std::string id = new_job_id();
  PendingFolder folder(job_folder(jobs_dir, id));
  std::vector<std::string> paths;
  std::vector<JobFile> files;
  for (size_t i = 0; i < sub.uploads.size(); ++i) {
    const Upload& u = sub.uploads[i];
    const std::string name = cat("upload-", i + 1, "-", u.field);
    paths.push_back((fs::path(folder.path()) / name).string());
    OutputFile(paths.back()).write_all_and_commit(u.content.data(), u.content.size());
    files.push_back({u.field, name, static_cast<int64_t>(u.content.size())});
  }
  set_upload_paths(sub, paths);
  if (!sub.seed_given) sub.request.seed = draw_seed();

  ResolvedRequest resolved;
  try {
    std::lock_guard lock(validator_mutex);
    resolved = validator->validate(sub.request);
  } catch (const Error& e) {
    // The engine names files by path: the client knows its uploads by field and name.
    std::string message = e.what();
    for (size_t i = 0; i < paths.size(); ++i)
      for (size_t at; (at = message.find(paths[i])) != std::string::npos;)
        message.replace(at, paths[i].size(), cat("\"", sub.uploads[i].field, "\" (", sub.uploads[i].filename, ")"));
    send_error(res, 400, "invalid_request", message);
    return;
  }

  Job job;
  job.id = id;
  job.created_at = now_seconds();
  job.request = request_to_json(sub.request, folder.path());
  job.prompt = sub.request.prompt;
  job.width = resolved.width;
  job.height = resolved.height;
  job.frames = resolved.frames;
  job.steps = resolved.steps;
  job.seed = sub.request.seed;
  if (!store->add(job, files, options.max_queue)) {
    send_error(res, 429, "queue_full", queue_full);
    return;
  }
  folder.keep();
  runner->wake();
  send_json(res, 200, video_json(*store->get(id)));
}

void Server::Impl::retrieve(const Request& req, Response& res) {
  if (const std::optional<Job> job = job_or_404(req, res)) send_json(res, 200, video_json(*job));
}

void Server::Impl::list(const Request& req, Response& res) {
  ListQuery q;
  try {
    q = parse_list_query({req.params.begin(), req.params.end()});
  } catch (const Error& e) {
    send_error(res, 400, "invalid_request", e.what());
    return;
  }
  const std::optional<JobStore::Page> page = store->list(q);
  if (!page) {
    send_error(res, 404, "not_found", cat("There is no video \"", q.after, "\" to list after."));
    return;
  }
  json data = json::array();
  for (const Job& j : page->jobs) data.push_back(video_json(j));
  send_json(res, 200,
            {{"object", "list"},
             {"data", data},
             {"first_id", page->jobs.empty() ? json(nullptr) : json(page->jobs.front().id)},
             {"last_id", page->jobs.empty() ? json(nullptr) : json(page->jobs.back().id)},
             {"has_more", page->has_more}});
}

void Server::Impl::content(const Request& req, Response& res) {
  for (const auto& [key, value] : req.params)
    if (key != "variant") {
      send_error(res, 400, "invalid_request", cat("Unknown query parameter \"", key, "\" (the content takes variant)."));
      return;
    }
  const std::string variant = req.has_param("variant") ? req.get_param_value("variant") : "video";
  if (variant != "video" && variant != "thumbnail") {
    send_error(res, 400, "invalid_request",
               cat("\"variant\" must be \"video\" or \"thumbnail\" (h3 makes no spritesheet), got \"", variant, "\"."));
    return;
  }
  const std::optional<Job> job = job_or_404(req, res);
  if (!job) return;
  if (job->status != JobStatus::Completed) {
    send_error(res, 409, "video_not_ready",
               job->status == JobStatus::Queued || job->status == JobStatus::InProgress
                   ? cat("The video \"", job->id, "\" is ", job_status_name(job->status), " (", job->progress,
                         " %): its content is served once it is completed.")
                   : cat("The video \"", job->id, "\" is ", job_status_name(job->status), ": it has no content."));
    return;
  }
  const std::optional<JobFile> file = store->file(job->id, variant);
  if (!file) {
    send_error(res, 500, "server_error", cat("The job database lists no ", variant, " for \"", job->id, "\"."));
    return;
  }
  std::string bytes = read_whole_file((fs::path(job_folder(jobs_dir, job->id)) / file->name).string());
  if (!clamp_ranges(req, bytes.size())) {
    res.set_header("Content-Range", cat("bytes */", bytes.size()));
    send_error(res, 416, "range_not_satisfiable",
               cat("The requested range lies outside the ", bytes.size(), " bytes of the file."));
    return;
  }
  res.set_header("Accept-Ranges", "bytes");
  res.set_content(bytes, variant == "video" ? "video/mp4" : "image/png");
}

void Server::Impl::preview(const Request& req, Response& res) {
  const std::optional<Job> job = job_or_404(req, res);
  if (!job) return;
  switch (job->status) {
    case JobStatus::Completed: {
      const std::optional<JobFile> file = store->file(job->id, "thumbnail");
      if (!file) break;
      res.set_content(read_whole_file((fs::path(job_folder(jobs_dir, job->id)) / file->name).string()), "image/png");
      return;
    }
    case JobStatus::InProgress:
      if (std::optional<JobRunner::Preview> p = runner->preview(job->id); p && !p->png.empty()) {
        res.set_header("X-H3-Preview-Pass", cat(p->pass, "/", p->passes));
        res.set_content(reinterpret_cast<const char*>(p->png.data()), p->png.size(), "image/png");
        return;
      }
      send_error(res, 409, "preview_not_ready",
                 cat("The video \"", job->id, "\" has no preview yet: the denoising pass after this request "
                     "decodes one; ask again."));
      return;
    case JobStatus::Queued:
      send_error(res, 409, "preview_not_ready",
                 cat("The video \"", job->id, "\" is queued: its previews begin with its denoising passes."));
      return;
    default: break;
  }
  send_error(res, 409, "video_not_ready",
             cat("The video \"", job->id, "\" is ", job_status_name(job->status), ": it has no preview."));
}

void Server::Impl::remove(const Request& req, Response& res) {
  const std::string id = req.matches[1];
  json answer = {{"id", id}, {"object", "video.deleted"}, {"deleted", false}};
  switch (store->cancel_or_remove(id)) {
    case JobStore::Removal::Unknown: send_error(res, 404, "not_found", cat("There is no video \"", id, "\".")); return;
    case JobStore::Removal::Cancelled: answer["status"] = job_status_name(JobStatus::Cancelled); break;
    case JobStore::Removal::CancelRequested:
      runner->cancel(id);
      answer["status"] = job_status_name(JobStatus::InProgress);  // cancelled at its next step
      break;
    case JobStore::Removal::Removed:
      fs::remove_all(job_folder(jobs_dir, id));
      answer["deleted"] = true;
      break;
  }
  send_json(res, 200, answer);
}

void Server::Impl::metrics(Response& res) {
  const std::map<JobStatus, int64_t> counts = store->count_by_status();
  std::map<std::string, double> seconds;
  for (Phase p : {Phase::Load, Phase::ReadReferences, Phase::EncodePrompt, Phase::EncodeKeyframes,
                  Phase::EncodeReferences, Phase::Denoise, Phase::DecodeVideo, Phase::DecodeAudio})
    seconds[phase_label(p)] = 0;
  seconds[kWritePhase] = 0;
  for (const auto& [phase, s] : runner->phase_seconds()) seconds[phase] = s;
  std::string out;
  out += "# HELP h3_queue_length Videos queued and not started yet.\n# TYPE h3_queue_length gauge\n";
  out += cat("h3_queue_length ", counts.at(JobStatus::Queued), "\n");
  out += "# HELP h3_jobs Videos in the job database by status.\n# TYPE h3_jobs gauge\n";
  for (JobStatus s : kAllJobStatuses) out += cat("h3_jobs{status=\"", job_status_name(s), "\"} ", counts.at(s), "\n");
  out += "# HELP h3_phase_seconds_total Wall seconds per phase of the videos this process generated.\n"
         "# TYPE h3_phase_seconds_total counter\n";
  for (const auto& [phase, s] : seconds) out += cat("h3_phase_seconds_total{phase=\"", phase, "\"} ", s, "\n");
  res.status = 200;
  res.set_content(out, "text/plain; version=0.0.4");
}

Server::Server(const ServerOptions& options) : impl_(std::make_unique<Impl>(options)) {}

Server::~Server() = default;

int Server::port() const { return impl_->port; }

void Server::serve() {
  struct Ended {
    Impl& m;
    ~Ended() { m.serving_ended = true; }
  } ended{*impl_};
  impl_->runner->start();
  if (!impl_->stop_requested) impl_->http.listen_after_bind();
  impl_->runner->stop();
}

void Server::stop() {
  impl_->stop_requested = true;
  // The library's stop() acts only once it listens: wait for that (or for serve() to end first).
  while (!impl_->http.is_running() && !impl_->serving_ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  impl_->http.stop();
}

}  // namespace h3::server
