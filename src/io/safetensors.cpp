#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/cancel.h"
#include "util/error.h"

namespace h3 {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t json_u64(const json& v, const std::string& what, const std::string& field) {
  H3_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), what, ": '", field,
           "' must hold non-negative integers");
  return v.get<uint64_t>();
}

TensorInfo parse_entry(const std::string& name, const json& e, const std::string& what, uint64_t data_begin,
                       uint64_t data_size) {
  const std::string where = what + ": tensor '" + name + "'";
  H3_CHECK(e.is_object(), where, ": header entry is not an object");
  H3_CHECK(e.contains("dtype") && e["dtype"].is_string(), where, ": missing string field 'dtype'");
  H3_CHECK(e.contains("shape") && e["shape"].is_array(), where, ": missing array field 'shape'");
  H3_CHECK(e.contains("data_offsets") && e["data_offsets"].is_array() && e["data_offsets"].size() == 2, where,
           ": 'data_offsets' must be [begin, end]");
  TensorInfo t;
  t.name = name;
  auto dt = dtype_from_name(e["dtype"].get<std::string>());
  H3_CHECK(dt.has_value(), where, ": unknown dtype '", e["dtype"].get<std::string>(),
           "' (known: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
  t.dtype = *dt;
  unsigned __int128 count = 1;
  for (const auto& d : e["shape"]) {
    uint64_t v = json_u64(d, where, "shape");
    H3_CHECK(v <= (uint64_t{1} << 48), where, ": dimension ", v, " is implausibly large");
    count *= v;
    H3_CHECK(count <= (static_cast<unsigned __int128>(1) << 62), where, ": shape has too many elements");
    t.shape.push_back(static_cast<int64_t>(v));
  }
  uint64_t begin = json_u64(e["data_offsets"][0], where, "data_offsets");
  uint64_t end = json_u64(e["data_offsets"][1], where, "data_offsets");
  H3_CHECK(begin <= end, where, ": data_offsets begin ", begin, " > end ", end);
  unsigned __int128 need = count * dtype_size(t.dtype);
  H3_CHECK(need == end - begin, where, ": shape ", shape_str(t.shape), " x ", dtype_name(t.dtype), " needs ",
           static_cast<uint64_t>(need), " bytes but data_offsets span ", end - begin);
  H3_CHECK(end <= data_size, where, ": bytes [", begin, ", ", end, ") lie beyond the end of the data (",
           data_size, " bytes) — the file is truncated or corrupt");
  t.offset = data_begin + begin;
  t.nbytes = end - begin;
  return t;
}

}  // namespace

std::vector<TensorInfo> parse_safetensors_header(const uint8_t* data, uint64_t size, const std::string& what,
                                                 std::map<std::string, std::string>* metadata) {
  H3_CHECK(size >= 8, what, ": file is truncated (", size,
           " bytes; a safetensors file starts with an 8-byte header length)");
  uint64_t n = read_u64_le(data);
  H3_CHECK(n <= kMaxSafetensorsHeader, what, ": header length ", n, " exceeds the limit of ",
           kMaxSafetensorsHeader, " bytes");
  H3_CHECK(n <= size - 8, what, ": file is truncated (header of ", n, " bytes but only ", size - 8,
           " bytes follow)");
  H3_CHECK(n >= 2 && data[8] == '{', what, ": header is not a JSON object");
  json header;
  try {
    header = json::parse(data + 8, data + 8 + n);
  } catch (const json::exception& e) {
    fail(what, ": header JSON is malformed (", e.what(), ")");
  }
  H3_CHECK(header.is_object(), what, ": header is not a JSON object");
  const uint64_t data_begin = 8 + n;
  const uint64_t data_size = size - data_begin;
  std::vector<TensorInfo> out;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      H3_CHECK(value.is_object(), what, ": '__metadata__' must be an object of strings");
      for (const auto& [mk, mv] : value.items()) {
        H3_CHECK(mv.is_string(), what, ": '__metadata__' entry '", mk, "' is not a string");
        if (metadata) (*metadata)[mk] = mv.get<std::string>();
      }
      continue;
    }
    out.push_back(parse_entry(key, value, what, data_begin, data_size));
  }
  // No two payloads may overlap (empty tensors occupy no bytes).
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : out)
    if (t.nbytes) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo* a = by_offset[i - 1];
    const TensorInfo* b = by_offset[i];
    H3_CHECK(a->offset + a->nbytes <= b->offset, what, ": tensors '", a->name, "' and '", b->name,
             "' overlap in the file");
  }
  std::sort(out.begin(), out.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return out;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto f = std::make_shared<SafetensorsFile>();
  f->file_ = MappedFile::open(path);
  f->tensors_ = parse_safetensors_header(f->file_->data(), f->file_->size(), path, &f->metadata_);
  return f;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

Tensor SafetensorsFile::tensor(const TensorInfo& info) const {
  void* p = const_cast<uint8_t*>(file_->data() + info.offset);
  return Tensor::view(p, info.shape, info.dtype, file_);
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorInfo* info = find(name);
  H3_CHECK(info != nullptr, path(), ": tensor '", name, "' is missing");
  return tensor(*info);
}

std::string serialize_safetensors(const std::vector<NamedTensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& nt : tensors) {
    H3_CHECK(nt.tensor.device() == Device::CPU, "serialize_safetensors: tensor '", nt.name, "' is not on the CPU");
    H3_CHECK(!header.contains(nt.name), "serialize_safetensors: duplicate tensor name '", nt.name, "'");
    uint64_t nb = nt.tensor.nbytes();
    header[nt.name] = {{"dtype", dtype_name(nt.tensor.dtype())},
                       {"shape", nt.tensor.shape()},
                       {"data_offsets", {offset, offset + nb}}};
    offset += nb;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h.push_back(' ');
  std::string out;
  out.reserve(8 + h.size() + offset);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += h;
  for (const auto& nt : tensors) out.append(static_cast<const char*>(nt.tensor.data()), nt.tensor.nbytes());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

// ---------------------------------------------------------------------------------------------------------------

Checkpoint Checkpoint::open(const std::string& path, bool inspect) {
  Checkpoint c;
  c.location_ = path;
  auto problem = [&](const std::string& msg) {
    if (!inspect) fail(msg);
    c.problems_.push_back(msg);
  };
  auto add_file = [&](const std::string& file) -> std::shared_ptr<SafetensorsFile> {
    try {
      auto f = SafetensorsFile::open(file);
      c.files_.push_back(f);
      return f;
    } catch (const Error& e) {
      problem(e.what());
      return nullptr;
    }
  };

  std::vector<std::string> index_files, st_files;
  if (fs::is_regular_file(path)) {
    st_files.push_back(path);
  } else {
    H3_CHECK(fs::is_directory(path), path, ": no such file or folder");
    for (const auto& e : fs::directory_iterator(path)) {
      std::string name = e.path().filename().string();
      if (name.ends_with(".safetensors.index.json")) index_files.push_back(e.path().string());
      else if (name.ends_with(".safetensors")) st_files.push_back(e.path().string());
    }
    std::sort(index_files.begin(), index_files.end());
    std::sort(st_files.begin(), st_files.end());
  }

  if (!index_files.empty()) {
    H3_CHECK(index_files.size() == 1, path, ": more than one *.safetensors.index.json");
    c.sharded_ = true;
    json idx;
    try {
      idx = json::parse(read_text_file(index_files[0]));
    } catch (const json::exception& e) {
      fail(index_files[0], ": malformed JSON (", e.what(), ")");
    }
    H3_CHECK(idx.is_object() && idx.contains("weight_map") && idx["weight_map"].is_object(), index_files[0],
             ": no 'weight_map' object");
    std::map<std::string, std::vector<std::string>> by_shard;
    for (const auto& [key, shard] : idx["weight_map"].items()) {
      H3_CHECK(shard.is_string(), index_files[0], ": weight_map entry '", key, "' is not a file name");
      std::string s = shard.get<std::string>();
      H3_CHECK(s.find('/') == std::string::npos && s.find("..") == std::string::npos, index_files[0],
               ": shard name '", s, "' must be a plain file name");
      by_shard[s].push_back(key);
    }
    for (const auto& [shard, keys] : by_shard) {
      std::string file = (fs::path(path) / shard).string();
      if (!fs::exists(file)) {
        ++c.missing_shards_;
        problem(cat(file, ": shard listed in ", fs::path(index_files[0]).filename().string(), " is missing (",
                    keys.size(), " tensors)"));
        c.unavailable_.insert(keys.begin(), keys.end());
        continue;
      }
      auto f = add_file(file);
      if (!f) {
        c.unavailable_.insert(keys.begin(), keys.end());
        continue;
      }
      for (const auto& key : keys) {
        const TensorInfo* info = f->find(key);
        if (!info) {
          problem(cat(file, ": tensor '", key, "' is listed in the index but absent from this shard"));
          continue;
        }
        c.index_[key] = {f.get(), info};
      }
    }
  } else {
    H3_CHECK(!st_files.empty(), path, ": no *.safetensors files");
    for (const auto& file : st_files) {
      auto f = add_file(file);
      if (!f) continue;
      for (const auto& info : f->tensors()) {
        if (c.index_.count(info.name)) {
          problem(cat(file, ": tensor '", info.name, "' also appears in ", c.index_[info.name].first->path()));
          continue;
        }
        c.index_[info.name] = {f.get(), &info};
      }
    }
  }
  return c;
}

const TensorInfo& Checkpoint::info(const std::string& name) const {
  auto it = index_.find(name);
  H3_CHECK(it != index_.end(), location_, ": tensor '", name, "' is missing");
  return *it->second.second;
}

const std::string& Checkpoint::file_of(const std::string& name) const {
  auto it = index_.find(name);
  H3_CHECK(it != index_.end(), location_, ": tensor '", name, "' is missing");
  return it->second.first->path();
}

Tensor Checkpoint::get(const std::string& name) const {
  throw_if_cancelled();  // loading a component is a tensor at a time: a cancel waits for one
  auto it = index_.find(name);
  H3_CHECK(it != index_.end(), location_, ": tensor '", name, "' is missing");
  return it->second.first->tensor(*it->second.second);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [k, v] : index_) out.push_back(k);
  return out;
}

uint64_t Checkpoint::param_count() const {
  uint64_t n = 0;
  for (const auto& [k, v] : index_) n += static_cast<uint64_t>(shape_numel(v.second->shape));
  return n;
}

std::map<DType, uint64_t> Checkpoint::bytes_per_dtype() const {
  std::map<DType, uint64_t> m;
  for (const auto& [k, v] : index_) m[v.second->dtype] += v.second->nbytes;
  return m;
}

}  // namespace h3
