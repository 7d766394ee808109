// The ring of block buffers, its two sources and the Disk source's reader threads (design: block_streamer.h).
#include "models/block_streamer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "util/error.h"

namespace h3 {

namespace {

constexpr size_t kSlotAlign = 256;           // each tensor of a slot starts on this boundary
constexpr uint64_t kDirectAlign = 4096;      // O_DIRECT offsets, lengths and buffers; staging regions
constexpr uint64_t kReadChunk = 8ull << 20;  // bytes per reader task
constexpr int64_t kMaxReaderThreads = 64;

uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
using Clock = std::chrono::steady_clock;

// One block's reads into a staging buffer; done when every task has finished.
struct Read {
  std::mutex m;
  std::condition_variable cv;
  int64_t remaining = 0;
  std::string error;
  std::shared_ptr<DeviceTimePoint> buffer_free;  // the copies out of the buffer's previous block have passed
  bool started_any = false;
  Clock::time_point started, finished;
  uint64_t bytes = 0;
};

struct ReadTask {
  std::shared_ptr<Read> read;
  int fd = -1;
  const std::string* path = nullptr;
  const std::string* tensor = nullptr;
  uint64_t offset = 0, length = 0;
  uint64_t need = 0;  // bytes that must arrive (the rest of `length` may lie past the end of the file)
  char* dst = nullptr;
};

// pread until `need` bytes (of at most `length`) have arrived; an error sentence, or empty.
std::string pread_task(const ReadTask& t) {
  uint64_t got = 0;
  while (got < t.length) {
    const ssize_t n = ::pread(t.fd, t.dst + got, t.length - got, static_cast<off_t>(t.offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return cat(*t.path, ": reading tensor '", *t.tensor, "' for block streaming failed at byte ", t.offset + got,
                 " (", std::strerror(errno), ")");
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  if (got < t.need)
    return cat(*t.path, ": tensor '", *t.tensor, "' ends past the end of the file (", got, " of ", t.need,
               " bytes at offset ", t.offset, " read)");
  return {};
}

// `threads` threads running read tasks in submission order.
class ReaderPool {
 public:
  ReaderPool(Backend& be, int64_t threads) : be_(be) {
    for (int64_t i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
  }
  ~ReaderPool() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void submit(std::vector<ReadTask> tasks) {
    {
      std::lock_guard<std::mutex> l(m_);
      for (ReadTask& t : tasks) queue_.push_back(std::move(t));
    }
    cv_.notify_all();
  }

 private:
  void run() {
    for (;;) {
      ReadTask t;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        t = std::move(queue_.front());
        queue_.pop_front();
      }
      execute(t);
    }
  }

  void execute(const ReadTask& t) {
    Read& r = *t.read;
    std::string error;
    try {
      if (r.buffer_free) be_.host_wait(*r.buffer_free);
    } catch (const std::exception& e) {
      error = e.what();
    }
    {
      std::lock_guard<std::mutex> l(r.m);
      if (!r.started_any) r.started = Clock::now();
      r.started_any = true;
    }
    if (error.empty()) error = pread_task(t);
    std::lock_guard<std::mutex> l(r.m);
    if (!error.empty() && r.error.empty()) r.error = error;
    r.bytes += t.length;
    if (--r.remaining == 0) {
      r.finished = Clock::now();
      r.cv.notify_all();
    }
  }

  Backend& be_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<ReadTask> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

void wait_read(Read& r) {
  std::unique_lock<std::mutex> l(r.m);
  r.cv.wait(l, [&] { return r.remaining == 0; });
}

}  // namespace

void validate_block_streaming(const BlockStreaming& o, const char* what) {
  H3_CHECK(o.slots >= 2, what, ": block streaming needs at least 2 slots (one block computing while the next is ",
           "copied in), got ", o.slots);
  H3_CHECK(o.reader_threads >= 1 && o.reader_threads <= kMaxReaderThreads, what,
           ": block streaming's reader threads must be 1 to ", kMaxReaderThreads, ", got ", o.reader_threads);
}

struct BlockStreamer::Impl {
  // One checkpoint tensor in a staging buffer: file bytes [begin, end) land at staging offset `at`; the tensor's
  // own bytes start at file offset info->offset.
  struct Region {
    std::string name;
    const TensorInfo* info = nullptr;
    size_t file = 0;
    uint64_t begin = 0, end = 0, at = 0;
  };
  struct Plan {
    std::vector<StreamedTensor> tensors;
    std::vector<Region> regions;
    std::map<std::string, size_t> region_of;
    uint64_t staging_bytes = 0;
  };
  struct Slot {
    Tensor buffer;
    std::vector<Tensor> views;
    std::shared_ptr<DeviceTimePoint> copied, computed;
  };
  struct Staging {
    Tensor buffer;
    int64_t block = -1;
    std::shared_ptr<Read> read;
    std::shared_ptr<DeviceTimePoint> drained;  // after the last copies out of it
  };
  struct LoadRecord {
    std::shared_ptr<DeviceTimePoint> start, copied, reached, released;
    uint64_t bytes = 0, read_bytes = 0;
    double read_seconds = 0;
  };

  Backend& be;
  BlockStreaming opt;
  int64_t num_blocks;
  LoadResident resident;
  std::shared_ptr<const Checkpoint> ck;
  DType act;
  std::vector<Plan> plans;  // per block
  size_t slot_bytes = 0;
  std::vector<size_t> offsets;  // per streamed tensor, in a slot
  std::vector<Slot> slots;
  // PinnedHost
  std::vector<std::vector<Tensor>> host_copies;  // per block; empty until made
  uint64_t host_copy_bytes = 0;
  // Disk
  std::vector<std::string> files;
  std::vector<int> fds;
  std::vector<Staging> staging;
  std::unique_ptr<ReaderPool> readers;
  // The ring: loads [0, issued) enqueued; `next` the next to acquire; the current pass began at load pass_begin.
  std::vector<int64_t> order;
  int64_t pass_begin = 0, next = 0, issued = 0;
  bool broken = true;  // no ring yet, or an error left it unusable
  std::map<int64_t, LoadRecord> records;
  std::vector<LoadRecord> last_pass;
  bool last_pass_measured = false;
  BlockStreamingStats measured;
  int64_t passes = 0;

  Impl(Backend& backend, const BlockStreaming& o, int64_t blocks, LoadResident res,
       std::shared_ptr<const Checkpoint> checkpoint)
      : be(backend), opt(o), num_blocks(blocks), resident(std::move(res)), ck(std::move(checkpoint)),
        act(backend.activation_dtype()) {}

  bool disk() const { return opt.source == BlockStreaming::Source::Disk; }
  int64_t S() const { return opt.slots; }
  int64_t n() const { return static_cast<int64_t>(order.size()); }

  size_t file_index(const std::string& path) {
    for (size_t i = 0; i < files.size(); ++i)
      if (files[i] == path) return i;
    const int flags = O_RDONLY | O_CLOEXEC | (opt.direct_io ? O_DIRECT : 0);
    const int fd = ::open(path.c_str(), flags);
    H3_CHECK(fd >= 0, path, ": cannot open for block streaming", opt.direct_io ? " with O_DIRECT" : "", " (",
             std::strerror(errno), ")",
             opt.direct_io && errno == EINVAL ? "; this file system does not support direct I/O: turn direct_io off"
                                              : "");
    files.push_back(path);
    fds.push_back(fd);
    return files.size() - 1;
  }

  // Where block b's pieces are in the checkpoint and in its staging buffer (Disk).
  void plan_regions(Plan& p) {
    for (const StreamedTensor& t : p.tensors)
      for (const StreamedPiece& piece : t.pieces) {
        if (p.region_of.count(piece.name)) continue;
        Region r;
        r.name = piece.name;
        r.info = &ck->info(piece.name);
        r.file = file_index(ck->file_of(piece.name));
        const uint64_t data_end = r.info->offset + r.info->nbytes;
        r.begin = opt.direct_io ? r.info->offset / kDirectAlign * kDirectAlign : r.info->offset;
        r.end = opt.direct_io ? round_up(data_end, kDirectAlign) : data_end;
        r.at = p.staging_bytes;
        p.staging_bytes += round_up(r.end - r.begin, kDirectAlign);
        p.region_of[piece.name] = p.regions.size();
        p.regions.push_back(std::move(r));
      }
  }

  // Rows [src_row, src_row + rows) of a staged checkpoint tensor, as a host tensor of its dtype.
  Tensor staged(const Staging& st, const Plan& p, const StreamedPiece& piece) const {
    const Region& r = p.regions[p.region_of.at(piece.name)];
    const TensorInfo& info = *r.info;
    char* base = static_cast<char*>(st.buffer.data()) + r.at + (info.offset - r.begin);
    if (info.shape.size() != 2) return Tensor::view(base, info.shape, info.dtype, st.buffer.owner());
    const int64_t rows = piece.rows > 0 ? piece.rows : info.shape[0];
    const size_t row_bytes = static_cast<size_t>(info.shape[1]) * dtype_size(info.dtype);
    return Tensor::view(base + piece.src_row * row_bytes, {rows, info.shape[1]}, info.dtype, st.buffer.owner());
  }

  void check_pieces(const Plan& p) const {
    for (size_t t = 0; t < p.tensors.size(); ++t) {
      const StreamedTensor& st = p.tensors[t];
      int64_t covered = 0;
      for (const StreamedPiece& piece : st.pieces) {
        const TensorInfo& info = ck->info(piece.name);
        const int64_t rows = info.shape.size() == 2 ? (piece.rows > 0 ? piece.rows : info.shape[0]) : 1;
        const int64_t width = info.shape.size() == 2 ? info.shape[1] : shape_numel(info.shape);
        H3_CHECK(piece.src_row >= 0 && piece.src_row + rows <= (info.shape.size() == 2 ? info.shape[0] : 1) &&
                     width == (st.shape.size() == 2 ? st.shape[1] : shape_numel(st.shape)),
                 ck->location(), ": tensor '", piece.name, "' ", shape_str(info.shape),
                 " does not fit the streamed tensor ", shape_str(st.shape));
        covered += rows * width;
      }
      H3_CHECK(covered == shape_numel(st.shape), "block streaming: the pieces of a ", shape_str(st.shape),
               " tensor cover ", covered, " elements");
    }
  }

  void make_host_copy(int64_t b) {
    std::vector<Tensor> device = resident(b);
    H3_CHECK(device.size() == offsets.size(), "block streaming: block ", b, " has ", device.size(), " tensors, not ",
             offsets.size());
    std::vector<Tensor> host;
    for (size_t t = 0; t < device.size(); ++t) {
      H3_CHECK(device[t].shape() == plans[b].tensors[t].shape && device[t].dtype() == act, "block streaming: block ",
               b, "'s tensor ", device[t].str(), " is not ", dtype_name(act), shape_str(plans[b].tensors[t].shape));
      // download_async lands in page-locked memory on CUDA, which the copy queue reads at full bandwidth.
      host.push_back(be.download_async(device[t])->wait());
      host_copy_bytes += host.back().nbytes();
    }
    host_copies[b] = std::move(host);
  }

  void schedule_read(size_t i, int64_t block) {
    Staging& st = staging[i];
    const Plan& p = plans[block];
    st.block = block;
    st.read = std::make_shared<Read>();
    st.read->buffer_free = st.drained;
    std::vector<ReadTask> tasks;
    for (const Region& r : p.regions) {
      const uint64_t data_end = r.info->offset + r.info->nbytes;
      for (uint64_t off = r.begin; off < r.end; off += kReadChunk) {
        ReadTask t;
        t.read = st.read;
        t.fd = fds[r.file];
        t.path = &files[r.file];
        t.tensor = &r.name;
        t.offset = off;
        t.length = std::min(kReadChunk, r.end - off);
        t.need = off < data_end ? std::min(t.length, data_end - off) : 0;
        t.dst = static_cast<char*>(st.buffer.data()) + r.at + (off - r.begin);
        tasks.push_back(t);
      }
    }
    st.read->remaining = static_cast<int64_t>(tasks.size());
    if (tasks.empty()) return;
    readers->submit(std::move(tasks));
  }

  // Enqueues load j: its block's copies into slot j % S after the compute that last read the slot.
  void issue(int64_t j) {
    Slot& s = slots[j % S()];
    const int64_t b = order[j % n()];
    const Plan& p = plans[b];
    LoadRecord rec;
    Staging* st = disk() ? &staging[j % S()] : nullptr;
    if (st) {
      H3_CHECK(st->block == b && st->read, "block streaming: staging buffer holds block ", st->block, ", not ", b);
      wait_read(*st->read);
      if (!st->read->error.empty()) throw Error(st->read->error);
      rec.read_bytes = st->read->bytes;
      rec.read_seconds = std::chrono::duration<double>(st->read->finished - st->read->started).count();
    }
    if (s.computed) be.copy_wait(*s.computed);
    rec.start = be.mark_copy_time();
    for (size_t t = 0; t < s.views.size(); ++t) {
      Tensor& dst = s.views[t];
      if (!st) {
        be.upload_async(host_copies[b][t], dst);
        rec.bytes += host_copies[b][t].nbytes();
        continue;
      }
      for (const StreamedPiece& piece : p.tensors[t].pieces) {
        Tensor host = staged(*st, p, piece);
        if (piece.host_dtype && *piece.host_dtype != host.dtype()) host = host.to(*piece.host_dtype);
        Tensor rows = dst.ndim() == 2 ? dst.slice(piece.dst_row, piece.dst_row + host.dim(0)) : dst;
        be.upload_async(host, rows);
        rec.bytes += host.nbytes();
      }
    }
    s.copied = rec.copied = be.mark_copy_time();
    records[j] = rec;
    issued = j + 1;
    if (st) {
      st->drained = s.copied;
      schedule_read(j % S(), order[(j + S()) % n()]);
    }
  }

  void drain_reads() {
    for (Staging& st : staging)
      if (st.read) wait_read(*st.read);
  }

  void restart(const std::vector<int64_t>& blocks) {
    broken = true;
    drain_reads();
    const std::shared_ptr<DeviceTimePoint> now = be.mark_time();  // covers compute still reading any slot
    for (Slot& s : slots) s.computed = now;
    records.clear();
    order = blocks;
    pass_begin = next = issued = 0;
    if (disk())
      for (int64_t i = 0; i < S(); ++i) schedule_read(static_cast<size_t>(i), order[i % n()]);
    for (int64_t j = 0; j < S(); ++j) issue(j);
    broken = false;
  }

  void measure_last_pass() {
    if (last_pass_measured || last_pass.empty()) return;
    BlockStreamingStats m;
    m.blocks = static_cast<int64_t>(last_pass.size());
    for (const LoadRecord& r : last_pass) {
      m.bytes += r.bytes;
      m.copy_seconds += std::max(0.0, be.device_seconds(*r.start, *r.copied));
      m.wait_seconds += std::max(0.0, be.device_seconds(*r.reached, *r.copied));
      m.read_bytes += r.read_bytes;
      m.read_seconds += r.read_seconds;
    }
    m.pass_seconds = std::max(0.0, be.device_seconds(*last_pass.front().reached, *last_pass.back().released));
    measured = m;
    last_pass_measured = true;
    if (opt.counters) {  // the residency plan's report (models/block_streaming.h): every pass counted once
      opt.counters->bytes_copied += m.bytes;
      opt.counters->copy_seconds += m.copy_seconds;
      opt.counters->stall_seconds += m.wait_seconds;
    }
  }

  ~Impl() {
    try {
      drain_reads();
      readers.reset();
      be.synchronize();
      for (Slot& s : slots)
        if (s.copied) be.host_wait(*s.copied);
    } catch (...) {  // a destructor must not throw; the backend reports its own errors on its next call
    }
    for (int fd : fds) ::close(fd);
  }
};

BlockStreamer::BlockStreamer(Backend& be, const BlockStreaming& options, int64_t num_blocks, Describe describe,
                             LoadResident resident, std::shared_ptr<const Checkpoint> checkpoint,
                             const std::vector<int64_t>& preload)
    : impl_(std::make_unique<Impl>(be, options, num_blocks, std::move(resident), std::move(checkpoint))) {
  validate_block_streaming(options, "block streaming");
  Impl& m = *impl_;
  H3_CHECK(num_blocks > 0, "block streaming: no blocks to stream");
  H3_CHECK(!m.disk() || m.ck, "block streaming from disk needs the checkpoint file the blocks are read from (a model ",
           "made from weights in memory streams from pinned host memory only)");
  m.plans.resize(num_blocks);
  for (int64_t b = 0; b < num_blocks; ++b) {
    m.plans[b].tensors = describe(b);
    H3_CHECK(m.plans[b].tensors.size() == m.plans[0].tensors.size(), "block streaming: block ", b,
             " has another tensor list than block 0");
    for (size_t t = 0; t < m.plans[b].tensors.size(); ++t)
      H3_CHECK(m.plans[b].tensors[t].shape == m.plans[0].tensors[t].shape, "block streaming: block ", b, "'s tensor ",
               t, " is ", shape_str(m.plans[b].tensors[t].shape), ", block 0's ", shape_str(m.plans[0].tensors[t].shape));
  }
  for (const StreamedTensor& t : m.plans[0].tensors) {
    m.offsets.push_back(m.slot_bytes);
    m.slot_bytes += round_up(static_cast<uint64_t>(shape_numel(t.shape)) * dtype_size(m.act), kSlotAlign);
  }
  m.slots.resize(options.slots);
  for (Impl::Slot& s : m.slots) {
    s.buffer = be.empty({static_cast<int64_t>(m.slot_bytes)}, DType::U8);
    for (size_t t = 0; t < m.offsets.size(); ++t)
      s.views.push_back(Tensor::view(static_cast<char*>(s.buffer.data()) + m.offsets[t], m.plans[0].tensors[t].shape,
                                     m.act, s.buffer.owner(), be.device()));
  }
  if (m.disk()) {
    uint64_t staging_bytes = 0;
    for (Impl::Plan& p : m.plans) {
      m.check_pieces(p);
      m.plan_regions(p);
      staging_bytes = std::max(staging_bytes, p.staging_bytes);
    }
    m.staging.resize(options.slots);
    for (Impl::Staging& st : m.staging) st.buffer = be.pinned_host_buffer(staging_bytes);
    m.readers = std::make_unique<ReaderPool>(be, options.reader_threads);
  } else {
    m.host_copies.resize(num_blocks);
    for (int64_t b : preload) {
      H3_CHECK(b >= 0 && b < num_blocks, "block streaming: block ", b, " is outside the ", num_blocks, " blocks");
      if (m.host_copies[b].empty()) m.make_host_copy(b);
    }
  }
}

BlockStreamer::~BlockStreamer() = default;

void BlockStreamer::begin_pass(const std::vector<int64_t>& blocks) {
  Impl& m = *impl_;
  H3_CHECK(!blocks.empty(), "block streaming: a pass runs no block");
  for (int64_t b : blocks) {
    H3_CHECK(b >= 0 && b < m.num_blocks, "block streaming: block ", b, " is outside the ", m.num_blocks, " blocks");
    if (!m.disk() && m.host_copies[b].empty()) m.make_host_copy(b);
  }
  if (!m.broken && blocks == m.order && m.next == m.pass_begin + m.n()) {
    m.pass_begin = m.next;  // the previous pass's releases have enqueued this one's first blocks
    return;
  }
  m.restart(blocks);
}

const std::vector<Tensor>& BlockStreamer::acquire(size_t k) {
  Impl& m = *impl_;
  const int64_t j = m.pass_begin + static_cast<int64_t>(k);
  H3_CHECK(!m.broken && j == m.next && static_cast<int64_t>(k) < m.n(), "block streaming: block ", k,
           " of the pass acquired out of order");
  Impl::Slot& s = m.slots[j % m.S()];
  m.records.at(j).reached = m.be.mark_time();
  m.be.compute_wait(*s.copied);
  return s.views;
}

void BlockStreamer::release(size_t k) {
  Impl& m = *impl_;
  const int64_t j = m.pass_begin + static_cast<int64_t>(k);
  H3_CHECK(!m.broken && j == m.next, "block streaming: block ", k, " of the pass released out of order");
  Impl::Slot& s = m.slots[j % m.S()];
  s.computed = m.be.mark_time();
  m.records.at(j).released = s.computed;
  m.next = j + 1;
  if (m.next == m.pass_begin + m.n()) {
    // With a report to feed, the pass before is measured before its records go (its events ended before this
    // pass's compute began, which the host waited for between passes).
    if (m.opt.counters) m.measure_last_pass();
    m.last_pass.clear();
    for (int64_t i = m.pass_begin; i < m.next; ++i) {
      m.last_pass.push_back(std::move(m.records.at(i)));
      m.records.erase(i);
    }
    m.last_pass_measured = false;
    ++m.passes;
  }
  try {
    m.issue(j + m.S());
  } catch (...) {
    m.broken = true;
    throw;
  }
}

BlockStreamingStats BlockStreamer::stats() {
  Impl& m = *impl_;
  m.measure_last_pass();
  BlockStreamingStats s = m.measured;
  s.passes = m.passes;
  s.host_bytes = host_bytes();
  s.device_bytes = device_bytes();
  return s;
}

uint64_t BlockStreamer::device_bytes() const { return impl_->slot_bytes * impl_->slots.size(); }

uint64_t BlockStreamer::host_bytes() const {
  uint64_t n = impl_->host_copy_bytes;
  for (const Impl::Staging& st : impl_->staging) n += st.buffer.nbytes();
  return n;
}

const BlockStreaming& BlockStreamer::options() const { return impl_->opt; }

}  // namespace h3
