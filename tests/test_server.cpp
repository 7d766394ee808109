// `h3 serve`'s parts without a process: the request body and query parsers (server/video_request.h), the request's
// JSON form kept in the job database (request_to_json), and the job store's rules (server/job_store.h).
#include <gtest/gtest.h>

#include <filesystem>

#include "pipeline/request_json.h"
#include "server/job_runner.h"
#include "server/job_store.h"
#include "server/video_request.h"
#include "temp_dir.h"
#include "util/error.h"

namespace h3::server {
namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

FormPart text(const std::string& name, const std::string& value) { return {name, "", "", value}; }
FormPart file(const std::string& name, const std::string& filename, const std::string& content) {
  return {name, filename, "application/octet-stream", content};
}

TEST(ServerVideoRequest, JsonFieldsMapOntoTheRequest) {
  const VideoSubmission s = parse_video_json(
      R"({"prompt": "a fox", "model": "sora-2", "size": "864x480", "seconds": "4", "steps": 3, "seed": 7})");
  EXPECT_EQ(s.request.prompt, "a fox");
  EXPECT_EQ(s.request.width, 864);
  EXPECT_EQ(s.request.height, 480);
  EXPECT_EQ(s.request.seconds, 4.0);  // OpenAI's seconds is a string
  EXPECT_FALSE(s.request.frames);
  EXPECT_EQ(s.request.steps, 3);
  EXPECT_EQ(s.request.seed, 7u);
  EXPECT_TRUE(s.seed_given);
  EXPECT_TRUE(s.uploads.empty());
  // Absent fields keep the engine's defaults; no seed given is said so (the server draws one).
  const VideoSubmission d = parse_video_json(R"({"prompt": "a fox", "seconds": 2.5})");
  EXPECT_FALSE(d.request.width || d.request.height || d.request.frames);
  EXPECT_EQ(d.request.seconds, 2.5);
  EXPECT_FALSE(d.request.steps);  // the checkpoint's passes (Engine::validate)
  EXPECT_FALSE(d.seed_given);
}

TEST(ServerVideoRequest, FormValuesAreTextReadWithJsonNumberSyntax) {
  const VideoSubmission s = parse_video_form({text("prompt", "42"), text("size", "32X64"), text("frames", "56"),
                                              text("steps", "2"), text("seed", "18446744073709551615")});
  EXPECT_EQ(s.request.prompt, "42");  // a prompt stays text even when it looks like a number
  EXPECT_EQ(s.request.width, 32);
  EXPECT_EQ(s.request.height, 64);
  EXPECT_EQ(s.request.frames, 56);
  EXPECT_EQ(s.request.steps, 2);
  EXPECT_EQ(s.request.seed, 18446744073709551615ull);
  EXPECT_EQ(parse_video_form({text("prompt", "p"), text("seconds", "4.5")}).request.seconds, 4.5);
}

// FastH3 (models/dit/dit_fasth3.h): the main blocks' attention and its sparsity, in a JSON body and in a form, kept
// in the job database's JSON form; whether the checkpoint can take them is Engine::validate's (test_server_process).
TEST(ServerVideoRequest, AttentionAndSparsityFields) {
  const VideoSubmission s = parse_video_json(R"({"prompt": "p", "attention": "sparse", "sparsity": 0.9})");
  EXPECT_EQ(s.request.attention, AttentionChoice::Sparse);
  EXPECT_EQ(s.request.sparsity, 0.9);
  const VideoSubmission d = parse_video_json(R"({"prompt": "p", "attention": "dense"})");
  EXPECT_EQ(d.request.attention, AttentionChoice::Dense);
  EXPECT_FALSE(d.request.sparsity);
  const VideoSubmission none = parse_video_json(R"({"prompt": "p"})");
  EXPECT_FALSE(none.request.attention || none.request.sparsity);  // the checkpoint's
  const VideoSubmission f =
      parse_video_form({text("prompt", "p"), text("attention", "sparse"), text("sparsity", "0.25")});
  EXPECT_EQ(f.request.attention, AttentionChoice::Sparse);
  EXPECT_EQ(f.request.sparsity, 0.25);
  EXPECT_EQ(error_of([] { parse_video_json(R"({"prompt": "p", "attention": "fast"})"); }),
            "\"attention\" must be \"dense\" or \"sparse\", got \"fast\"");
  EXPECT_EQ(error_of([] { parse_video_json(R"({"prompt": "p", "attention": 1})"); }),
            "\"attention\" must be \"dense\" or \"sparse\", got 1");
  EXPECT_EQ(error_of([] { parse_video_json(R"({"prompt": "p", "sparsity": true})"); }),
            "\"sparsity\" must be a number, got boolean");
  // A form's value is the client's bytes: not UTF-8, or long, it is shown replaced and cut (found by
  // fuzz_http_request: the JSON text of such bytes used to throw past the parser's sentence).
  EXPECT_EQ(error_of([] { parse_video_form({text("prompt", "p"), text("attention", "de\xffnse")}); }),
            "\"attention\" must be \"dense\" or \"sparse\", got \"de\xef\xbf\xbdnse\"");
  EXPECT_EQ(error_of([] { parse_video_form({text("prompt", "p"), text("attention", std::string(100, 'x'))}); }),
            "\"attention\" must be \"dense\" or \"sparse\", got \"" + std::string(40, 'x') + "\"...");
  EXPECT_EQ(error_of([] { parse_video_form({text("prompt", "p"), text("sparsity", "high")}); }),
            "\"sparsity\" must be a number, got the text \"high\"");
  EXPECT_EQ(error_of([] {
              parse_video_form({text("prompt", "p"), text("attention", "sparse"), text("attention", "dense")});
            }),
            "the field \"attention\" was given twice");
  // A range the request's rules own: one of request_problems' sentences.
  GenerationRequest bad = s.request;
  bad.sparsity = 1.0;
  bool named = false;
  for (const std::string& problem : request_problems(bad)) named = named || problem.find("[0, 1)") != std::string::npos;
  EXPECT_TRUE(named);
  // The job database's form keeps both.
  const GenerationRequest back = parse_request_json(request_to_json(s.request, "/jobs/v1"), "/jobs/v1");
  EXPECT_EQ(back.attention, s.request.attention);
  EXPECT_EQ(back.sparsity, s.request.sparsity);
  EXPECT_FALSE(back.steps);  // absent stays absent: the checkpoint's passes when the job runs
}

TEST(ServerVideoRequest, RefusesWithOneSentenceNamingTheField) {
  EXPECT_NE(error_of([] { parse_video_json("{\"prompt\": "); }).find("not valid JSON"), std::string::npos);
  EXPECT_EQ(error_of([] { parse_video_json("[1]"); }), "a video request must be a JSON object, got array");
  EXPECT_EQ(error_of([] { parse_video_json(R"({"size": "8x8"})"); }), "a video request needs a \"prompt\"");
  EXPECT_EQ(error_of([] { parse_video_json(R"({"prompt": 5})"); }), "\"prompt\" must be a string, got number");
  EXPECT_EQ(error_of([] { parse_video_json(R"({"prompt": "p", "steps": "two"})"); }),
            "\"steps\" must be an integer, got the text \"two\"");
  EXPECT_EQ(error_of([] { parse_video_json(R"({"prompt": "p", "steps": 2.5})"); }),
            "\"steps\" must be an integer, got number 2.5");
  EXPECT_EQ(error_of([] { parse_video_json(R"({"prompt": "p", "seconds": true})"); }),
            "\"seconds\" must be a number, got boolean");
  EXPECT_EQ(error_of([] { parse_video_json(R"({"prompt": "p", "seed": -1})"); }),
            "\"seed\" must be an integer between 0 and 18446744073709551615, got -1");
  EXPECT_NE(error_of([] { parse_video_json(R"({"prompt": "p", "fps": 30})"); }).find("unknown field \"fps\""),
            std::string::npos);
  EXPECT_EQ(error_of([] { parse_video_json(R"({"prompt": "p", "input_reference": {"image_url": "x"}})"); }),
            "\"input_reference\" is a file: send it as a file part of a multipart/form-data request");
  EXPECT_EQ(error_of([] { parse_video_form({text("prompt", "p"), text("prompt", "q")}); }),
            "the field \"prompt\" was given twice");
  EXPECT_EQ(error_of([] { parse_video_form({text("prompt", "p"), file("size", "s.txt", "8x8")}); }).substr(0, 38),
            "\"size\" is a text field, not a file (th");
  EXPECT_EQ(error_of([] { parse_video_form({text("prompt", "p"), file("input_reference", "a.png", "")}); }),
            "the file \"input_reference\" (\"a.png\") is empty");
  EXPECT_EQ(error_of([] {
              parse_video_form({text("prompt", "p"), file("last_frame", "a", "x"), file("last_frame", "b", "y")});
            }),
            "\"last_frame\" was given twice; a video has one last keyframe");
  // A long text is quoted cut short.
  EXPECT_EQ(error_of([] { parse_video_form({text("prompt", "p"), text("steps", std::string(100, 'x'))}); }),
            "\"steps\" must be an integer, got the text \"" + std::string(40, 'x') + "...\"");
}

TEST(ServerVideoRequest, SizeIsWidthByHeight) {
  EXPECT_EQ(parse_video_size("864x480"), (std::pair<int64_t, int64_t>{864, 480}));
  EXPECT_EQ(parse_video_size("1X2"), (std::pair<int64_t, int64_t>{1, 2}));
  for (const char* bad : {"", "x", "864", "864x", "x480", "864*480", "-8x8", "+8x8", "8x-8", "8x8x8", " 8x8", "8x8 ",
                          "99999999999999999999x8", "0x1e3"})
    EXPECT_EQ(error_of([&] { parse_video_size(bad); }),
              cat("\"size\" must be WIDTHxHEIGHT in pixels, such as \"864x480\", got \"", bad, "\""))
        << bad;
}

TEST(ServerVideoRequest, FilesKeepTheirPartsOrder) {
  VideoSubmission s = parse_video_form({text("prompt", "p"), file("reference_video", "v.mp4", "v"),
                                        file("reference_image", "i.png", "i"), text("seed", "3"),
                                        file("reference_silent_video", "s.mp4", "s"),
                                        file("reference_audio", "a.wav", "a")});
  ASSERT_EQ(s.uploads.size(), 4u);
  ASSERT_EQ(s.request.references.size(), 4u);
  using K = ReferenceInput::Kind;
  EXPECT_EQ(s.request.references[0].kind, K::Video);
  EXPECT_EQ(s.request.references[0].soundtrack, ReferenceInput::Soundtrack::Own);
  EXPECT_EQ(s.request.references[1].kind, K::Image);
  EXPECT_EQ(s.request.references[2].kind, K::Video);
  EXPECT_EQ(s.request.references[2].soundtrack, ReferenceInput::Soundtrack::None);
  EXPECT_EQ(s.request.references[3].kind, K::Audio);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s.uploads[i].role, Upload::Role::Reference);
    EXPECT_EQ(s.uploads[i].reference, i);
  }
  EXPECT_EQ(s.uploads[1].filename, "i.png");
  EXPECT_EQ(s.uploads[3].content, "a");
  set_upload_paths(s, {"/j/1", "/j/2", "/j/3", "/j/4"});
  EXPECT_EQ(s.request.references[2].path, "/j/3");
  EXPECT_EQ(s.request.workflow(), Workflow::Ref2VA);

  VideoSubmission k = parse_video_form(
      {file("last_frame", "b.png", "b"), text("prompt", "p"), file("input_reference", "a.png", "a")});
  ASSERT_EQ(k.uploads.size(), 2u);
  EXPECT_EQ(k.uploads[0].role, Upload::Role::LastFrame);
  EXPECT_EQ(k.uploads[1].role, Upload::Role::FirstFrame);
  set_upload_paths(k, {"/j/last", "/j/first"});
  EXPECT_EQ(k.request.first_frame->path, "/j/first");
  EXPECT_EQ(k.request.last_frame->path, "/j/last");
  EXPECT_EQ(k.request.workflow(), Workflow::FL2VA);
}

TEST(ServerVideoRequest, ListQuery) {
  const ListQuery d = parse_list_query({});
  EXPECT_EQ(d.limit, kDefaultListLimit);
  EXPECT_TRUE(d.after.empty());
  EXPECT_FALSE(d.ascending);
  const ListQuery q = parse_list_query({{"limit", "100"}, {"after", "video_1"}, {"order", "asc"}});
  EXPECT_EQ(q.limit, 100);
  EXPECT_EQ(q.after, "video_1");
  EXPECT_TRUE(q.ascending);
  EXPECT_EQ(error_of([] { parse_list_query({{"limit", "0"}}); }), "\"limit\" must be between 1 and 100, got 0");
  EXPECT_EQ(error_of([] { parse_list_query({{"limit", "101"}}); }), "\"limit\" must be between 1 and 100, got 101");
  EXPECT_EQ(error_of([] { parse_list_query({{"limit", "ten"}}); }), "\"limit\" must be an integer, got the text \"ten\"");
  EXPECT_EQ(error_of([] { parse_list_query({{"order", "up"}}); }), "\"order\" must be \"asc\" or \"desc\", got \"up\"");
  EXPECT_EQ(error_of([] { parse_list_query({{"after", ""}}); }), "\"after\" must name a video id, got an empty value");
  EXPECT_EQ(error_of([] { parse_list_query({{"limit", "1"}, {"limit", "2"}}); }),
            "the query parameter \"limit\" was given twice");
  EXPECT_EQ(error_of([] { parse_list_query({{"page", "2"}}); }),
            "unknown query parameter \"page\" (the list takes limit, after, order)");
}

TEST(ServerRequestJson, RoundTripsWithPathsRelativeToTheJobFolder) {
  GenerationRequest r;
  r.prompt = "a fox \"quoted\"";
  r.width = 64;
  r.height = 32;
  r.seconds = 2.25;
  r.steps = 3;
  r.seed = 18446744073709551615ull;
  ReferenceInput image, silent, replaced;
  image.kind = ReferenceInput::Kind::Image;
  image.path = "/data/jobs/v1/upload-1";
  silent.kind = ReferenceInput::Kind::Video;
  silent.path = "/data/jobs/v1/upload-2";
  silent.soundtrack = ReferenceInput::Soundtrack::None;
  replaced.kind = ReferenceInput::Kind::Video;
  replaced.path = "/elsewhere/clip.mp4";
  replaced.soundtrack = ReferenceInput::Soundtrack::Replaced;
  replaced.soundtrack_path = "/data/jobs/v1/sound.wav";
  r.references = {image, silent, replaced};
  const std::string text = request_to_json(r, "/data/jobs/v1");
  EXPECT_EQ(text.find("/data/jobs/v1"), std::string::npos) << text;  // the folder may move with the data folder
  const GenerationRequest back = parse_request_json(text, "/moved/v1");
  EXPECT_EQ(back.prompt, r.prompt);
  EXPECT_EQ(back.width, r.width);
  EXPECT_EQ(back.height, r.height);
  EXPECT_EQ(back.seconds, r.seconds);
  EXPECT_FALSE(back.frames);
  EXPECT_EQ(back.steps, r.steps);
  EXPECT_EQ(back.seed, r.seed);
  ASSERT_EQ(back.references.size(), 3u);
  EXPECT_EQ(back.references[0].path, "/moved/v1/upload-1");
  EXPECT_EQ(back.references[1].soundtrack, ReferenceInput::Soundtrack::None);
  EXPECT_EQ(back.references[2].path, "/elsewhere/clip.mp4");  // outside the folder: kept absolute
  EXPECT_EQ(back.references[2].soundtrack_path, "/moved/v1/sound.wav");

  GenerationRequest k;
  k.prompt = "p";
  k.frames = 22;
  k.first_frame = ImageInput::file("/data/jobs/v2/upload-1-input_reference");
  const GenerationRequest kb = parse_request_json(request_to_json(k, "/data/jobs/v2"), "/d");
  EXPECT_EQ(kb.frames, 22);
  EXPECT_EQ(kb.first_frame->path, "/d/upload-1-input_reference");
  EXPECT_FALSE(kb.last_frame);

  GenerationRequest mem;
  mem.prompt = "p";
  mem.first_frame = ImageInput::rgb8(Rgb8Image{});
  EXPECT_EQ(error_of([&] { request_to_json(mem, ""); }), "a request with an in-memory keyframe has no JSON form");
}

TEST(ServerProgress, RisesThroughThePhases) {
  EXPECT_EQ(job_progress(Phase::Load, 0, 1), 0);
  EXPECT_EQ(job_progress(Phase::Denoise, 0, 20), kDenoiseStart);
  EXPECT_EQ(job_progress(Phase::Denoise, 10, 20), (kDenoiseStart + kDenoiseEnd) / 2);
  EXPECT_EQ(job_progress(Phase::Denoise, 20, 20), kDenoiseEnd);
  EXPECT_EQ(job_progress(Phase::DecodeVideo, 124, 124), kDecodeEnd);
  EXPECT_EQ(job_progress(Phase::DecodeAudio, 0, 1), kDecodeEnd);
  // Never backwards from one phase to the next, in the engine's order.
  int64_t last = 0;
  for (Phase p : {Phase::Load, Phase::ReadReferences, Phase::EncodePrompt, Phase::EncodeKeyframes,
                  Phase::EncodeReferences, Phase::Denoise, Phase::DecodeVideo, Phase::DecodeAudio}) {
    EXPECT_GE(job_progress(p, 0, 4), last) << phase_name(p);
    last = job_progress(p, 4, 4);
  }
  EXPECT_LT(last, kWriteProgress);
  EXPECT_EQ(phase_label(Phase::DecodeVideo), "video_decode");
}

// ---- the job store

Job job_named(const std::string& id) {
  Job j;
  j.id = id;
  j.created_at = 1000;
  j.request = R"({"prompt": "p"})";
  j.prompt = "p";
  j.width = 16;
  j.height = 8;
  j.frames = 22;
  j.steps = 2;
  j.seed = 18446744073709551615ull;
  return j;
}

struct ServerJobStore : ::testing::Test {
  TempDir dir{"job-store"};
  std::string db() const { return dir / "jobs.sqlite3"; }
};

TEST_F(ServerJobStore, AddKeepsTheQueueLimitAndTheFields) {
  JobStore s(db());
  EXPECT_TRUE(s.add(job_named("a"), {{"input_reference", "upload-1-input_reference", 5}}, 2));
  EXPECT_TRUE(s.add(job_named("b"), {}, 2));
  EXPECT_FALSE(s.add(job_named("c"), {}, 2));  // two queued already
  EXPECT_FALSE(s.get("c"));
  const std::optional<Job> a = s.get("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, JobStatus::Queued);
  EXPECT_EQ(a->seed, 18446744073709551615ull);
  EXPECT_EQ(a->frames, 22);
  EXPECT_EQ(a->request, R"({"prompt": "p"})");
  ASSERT_EQ(s.files("a").size(), 1u);
  EXPECT_EQ(s.files("a")[0].bytes, 5);
  // A started job leaves the queue: room for one more.
  ASSERT_TRUE(s.start_next());
  EXPECT_TRUE(s.add(job_named("c"), {}, 2));
  EXPECT_EQ(s.count_by_status()[JobStatus::Queued], 2);
  EXPECT_EQ(s.count_by_status()[JobStatus::InProgress], 1);
}

TEST_F(ServerJobStore, StartsTheOldestAndCountsItsStarts) {
  JobStore s(db());
  s.add(job_named("first"), {}, 10);
  s.add(job_named("second"), {}, 10);
  const std::optional<Job> j = s.start_next();
  ASSERT_TRUE(j);
  EXPECT_EQ(j->id, "first");
  EXPECT_EQ(j->status, JobStatus::InProgress);
  EXPECT_EQ(j->starts, 1);
  EXPECT_GT(j->started_at, 0);
  s.set_progress("first", 42, "denoise");
  EXPECT_EQ(s.get("first")->progress, 42);
  EXPECT_EQ(s.get("first")->phase, "denoise");
  // A graceful stop puts it back without counting the start.
  s.requeue("first");
  EXPECT_EQ(s.get("first")->status, JobStatus::Queued);
  EXPECT_EQ(s.get("first")->starts, 0);
  EXPECT_EQ(s.get("first")->progress, 0);
  EXPECT_EQ(s.start_next()->id, "first");
}

TEST_F(ServerJobStore, RecoveryQueuesARunningJobAgainThenFailsIt) {
  {
    JobStore s(db());
    s.add(job_named("crashy"), {}, 10);
    s.add(job_named("waiting"), {}, 10);
    s.start_next();
    s.set_progress("crashy", 50, "denoise");
  }  // the server dies here
  {
    JobStore s(db());
    const std::vector<std::string> lines = s.recover();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0], "crashy: queued again (the server stopped while it ran)");
    const Job j = *s.get("crashy");
    EXPECT_EQ(j.status, JobStatus::Queued);
    EXPECT_EQ(j.progress, 0);
    EXPECT_EQ(j.phase, "");
    EXPECT_EQ(s.get("waiting")->status, JobStatus::Queued);
    EXPECT_EQ(s.start_next()->id, "crashy");  // it keeps its place
  }  // and dies again during its second start
  JobStore s(db());
  EXPECT_EQ(s.recover().size(), 1u);
  const Job j = *s.get("crashy");
  EXPECT_EQ(j.status, JobStatus::Failed);
  ASSERT_TRUE(j.error);
  EXPECT_EQ(j.error->code, "server_stopped");
  EXPECT_EQ(j.error->message,
            "The server stopped while running this job 2 times (killed or crashed, e.g. out of memory); it is not "
            "started again.");
  EXPECT_GT(j.completed_at, 0);
  EXPECT_TRUE(s.recover().empty());
}

TEST_F(ServerJobStore, CancelAndRemove) {
  JobStore s(db());
  s.add(job_named("queued"), {}, 10);
  s.add(job_named("running"), {}, 10);
  s.add(job_named("done"), {{"input_reference", "in", 1}}, 10);
  EXPECT_EQ(s.cancel_or_remove("nope"), JobStore::Removal::Unknown);
  EXPECT_EQ(s.cancel_or_remove("queued"), JobStore::Removal::Cancelled);
  EXPECT_EQ(s.get("queued")->status, JobStatus::Cancelled);
  EXPECT_EQ(s.start_next()->id, "running");  // the cancelled job is skipped
  EXPECT_EQ(s.cancel_or_remove("running"), JobStore::Removal::CancelRequested);
  EXPECT_TRUE(s.get("running")->cancel_requested);
  // A run that finishes after a cancel was asked for is cancelled, its outputs not recorded.
  EXPECT_FALSE(s.complete("running", {{"video", "video.mp4", 10}}));
  EXPECT_EQ(s.get("running")->status, JobStatus::Cancelled);
  EXPECT_FALSE(s.file("running", "video"));
  EXPECT_EQ(s.start_next()->id, "done");
  EXPECT_TRUE(s.complete("done", {{"video", "video.mp4", 10}, {"thumbnail", "thumbnail.png", 3}}));
  EXPECT_EQ(s.get("done")->status, JobStatus::Completed);
  EXPECT_EQ(s.get("done")->progress, 100);
  EXPECT_EQ(s.file("done", "video")->name, "video.mp4");
  EXPECT_EQ(s.files("done").size(), 3u);
  EXPECT_EQ(s.cancel_or_remove("done"), JobStore::Removal::Removed);
  EXPECT_FALSE(s.get("done"));
  EXPECT_TRUE(s.files("done").empty());
  EXPECT_EQ(s.cancel_or_remove("queued"), JobStore::Removal::Removed);  // a cancelled job is finished
}

TEST_F(ServerJobStore, RecoveryCancelsARunningJobWhoseCancelWasAskedFor) {
  {
    JobStore s(db());
    s.add(job_named("j"), {}, 10);
    s.start_next();
    s.cancel_or_remove("j");
  }
  JobStore s(db());
  s.recover();
  EXPECT_EQ(s.get("j")->status, JobStatus::Cancelled);
}

TEST_F(ServerJobStore, FailedJobsKeepTheirReason) {
  JobStore s(db());
  s.add(job_named("j"), {}, 10);
  s.start_next();
  s.finish("j", JobStatus::Failed, JobError{"generation_failed", "it broke"});
  const Job j = *s.get("j");
  EXPECT_EQ(j.status, JobStatus::Failed);
  EXPECT_EQ(j.error->message, "it broke");
  EXPECT_EQ(error_of([&] { s.finish("j", JobStatus::Completed, std::nullopt); }),
            "JobStore::finish: completed is not an end of a run");
}

TEST_F(ServerJobStore, ListsPagesNewestFirstOrOldestFirst) {
  JobStore s(db());
  for (const char* id : {"j1", "j2", "j3", "j4", "j5"}) s.add(job_named(id), {}, 10);
  auto ids = [](const JobStore::Page& p) {
    std::string out;
    for (const Job& j : p.jobs) out += j.id + " ";
    return out;
  };
  ListQuery q;
  q.limit = 2;
  JobStore::Page p = *s.list(q);
  EXPECT_EQ(ids(p), "j5 j4 ");
  EXPECT_TRUE(p.has_more);
  q.after = "j4";
  p = *s.list(q);
  EXPECT_EQ(ids(p), "j3 j2 ");
  EXPECT_TRUE(p.has_more);
  q.after = "j2";
  p = *s.list(q);
  EXPECT_EQ(ids(p), "j1 ");
  EXPECT_FALSE(p.has_more);
  q = ListQuery{};
  q.ascending = true;
  q.limit = 5;
  p = *s.list(q);
  EXPECT_EQ(ids(p), "j1 j2 j3 j4 j5 ");
  EXPECT_FALSE(p.has_more);
  q.after = "gone";
  EXPECT_FALSE(s.list(q));
}

TEST_F(ServerJobStore, RefusesADatabaseOfALaterSchema) {
  { JobStore s(db()); }
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db().c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  EXPECT_EQ(error_of([&] { JobStore s(db()); }),
            db() + ": the job database was made by a later h3 (schema version 99; this one reads 1)");
}

}  // namespace
}  // namespace h3::server
