// safetensors: validated header parsing, zero-copy tensor views over a memory-mapped file, sharded checkpoints
// through `*.safetensors.index.json`, and a writer. Every failure names the file and, where there is one, the tensor.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "util/mapped_file.h"

namespace h3 {

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t offset;  // absolute byte offset of the payload in the file
  uint64_t nbytes;
};

// Largest header we accept (the safetensors format's own limit).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

// Parses and validates the header of a safetensors image of `size` bytes (only the first 8 + header-length bytes
// are read). `what` names the file in error messages. Checks: header length bound, JSON well-formed, every entry's
// dtype known, shape non-negative, shape x dtype size == byte span, spans inside the file, no overlaps,
// `__metadata__` a string map. Returns the tensors sorted by name.
std::vector<TensorInfo> parse_safetensors_header(const uint8_t* data, uint64_t size, const std::string& what,
                                                 std::map<std::string, std::string>* metadata = nullptr);

class SafetensorsFile {
 public:
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint64_t file_size() const { return file_->size(); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;
  // Zero-copy view; the view keeps the mapping alive.
  Tensor tensor(const std::string& name) const;
  Tensor tensor(const TensorInfo& info) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::shared_ptr<MappedFile> file_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  Tensor tensor;  // CPU
};

// Serializes tensors (CPU, any dtype) into safetensors bytes; the header is space-padded to 8 bytes.
std::string serialize_safetensors(const std::vector<NamedTensor>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
// Writes to a temporary name and renames on success.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// The weights of one component: one safetensors file, every `*.safetensors` of a folder, or the shards named by a
// `*.safetensors.index.json`. In inspect mode, problems (missing shard, truncated/corrupt file, tensor listed in
// the index but absent from its shard) are collected as one line each instead of thrown.
class Checkpoint {
 public:
  static Checkpoint open(const std::string& path, bool inspect = false);

  const std::string& location() const { return location_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;
  Tensor get(const std::string& name) const;  // throws "<location>: tensor 'name' is missing"
  // The file holding tensor `name` (info(name).offset is into it), for readers that bypass the mapping.
  const std::string& file_of(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t tensor_count() const { return index_.size(); }
  size_t shard_count() const { return files_.size() + missing_shards_; }
  uint64_t param_count() const;
  std::map<DType, uint64_t> bytes_per_dtype() const;
  const std::vector<std::string>& problems() const { return problems_; }
  bool sharded() const { return sharded_; }
  // Names the index lists whose shard is missing or unreadable (already reported as one problem per shard).
  bool unavailable(const std::string& name) const { return unavailable_.count(name) != 0; }

 private:
  std::string location_;
  bool sharded_ = false;
  size_t missing_shards_ = 0;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<const SafetensorsFile*, const TensorInfo*>> index_;
  std::vector<std::string> problems_;
  std::set<std::string> unavailable_;
};

}  // namespace h3
