// `h3 serve`: one resident engine behind HTTP, with OpenAI's video API (openai-node src/resources/videos.ts), so
// that its clients work unchanged. The HTTP protocol is Debian's cpp-httplib; the routes:
//
//   POST   /v1/videos               queue a video (server/video_request.h: JSON or multipart/form-data)
//   GET    /v1/videos               list, newest first (limit, after, order), OpenAI's cursor page
//   GET    /v1/videos/{id}          the video object: status, progress 0..100, phase, error
//   GET    /v1/videos/{id}/content  the MP4 (Range requests honoured); ?variant=thumbnail: its middle frame, PNG
//   GET    /v1/videos/{id}/preview  PNG: the running job's latest denoising preview, a finished one's thumbnail
//   DELETE /v1/videos/{id}          a queued or running job is cancelled; a finished one is deleted with its files
//   GET    /healthz                 {"status": "ok"}
//   GET    /metrics                 Prometheus text: queue length, jobs by status, seconds per phase
//
// Errors are OpenAI's shape, {"error": {"message", "type", "param", "code"}}, with the status saying which: 400 a
// request that breaks a rule (the engine's sentence), 401 a missing or wrong API key, 404 an unknown id or route,
// 409 a video not ready, 413 a body over the limit, 415 a body of another type, 429 a full queue.
//
// Data folder: jobs.sqlite3 (server/job_store.h), jobs/<id>/ (the uploads, video.mp4, thumbnail.png), and a lock
// held while a server uses the folder (a second server on it is refused).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace h3::server {

struct ServerOptions {
  std::string model_dir;
  std::string device = "auto";
  std::string host = "127.0.0.1";
  int port = 8080;                        // 0: any free port (Server::port() says which)
  std::string api_key;                    // empty: no key asked for
  int64_t max_queue = 64;                 // queued jobs beyond which a submission gets 429
  std::string data_dir = "h3-serve";
  int64_t max_body_bytes = 256ll << 20;   // the largest request body (uploads included)
  int timeout_seconds = 30;               // a client that sends or reads nothing for this long is dropped
};

class Server {
 public:
  // Opens the data folder (settling what a stopped server left: JobStore::recover), the engine and the port.
  explicit Server(const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  // Serves until stop(); then the job runner stops (JobRunner::stop: a generating job is queued again).
  void serve();
  // From any thread (a signal handler's thread): ends serve().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace h3::server
