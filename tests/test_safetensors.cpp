// The safetensors reader's validation paths, each with a bad file made here, and the sharded checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"

using namespace h3;
namespace fs = std::filesystem;

namespace {

std::string tmpdir(const std::string& name) {
  std::string d = (fs::temp_directory_path() / ("h3_st_" + name + "_" + std::to_string(getpid()))).string();
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A safetensors image with the given header JSON and `payload` bytes of data.
std::string image(const std::string& header, size_t payload) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += header;
  out.append(payload, '\x01');
  return out;
}

std::string parse_error(const std::string& bytes) {
  try {
    parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "f.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, RoundTripAllDtypesZeroCopy) {
  std::vector<NamedTensor> ts;
  int k = 0;
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::I16, DType::I8,
                   DType::U8, DType::Bool}) {
    Tensor t = Tensor::empty({2, 3}, dt);
    for (size_t i = 0; i < t.nbytes(); ++i) static_cast<uint8_t*>(t.data())[i] = static_cast<uint8_t>(i * 7 + k);
    ts.push_back({cat("t", k++, "_", dtype_name(dt)), t});
  }
  ts.push_back({"empty", Tensor::empty({0, 4}, DType::F32)});
  ts.push_back({"scalar", Tensor::from_f32({}, {2.5f})});
  std::string d = tmpdir("rt");
  write_safetensors(d + "/a.safetensors", ts, {{"format", "pt"}});
  auto f = SafetensorsFile::open(d + "/a.safetensors");
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->tensors().size(), ts.size());
  for (const auto& nt : ts) {
    Tensor v = f->tensor(nt.name);
    ASSERT_EQ(v.dtype(), nt.tensor.dtype()) << nt.name;
    ASSERT_EQ(v.shape(), nt.tensor.shape()) << nt.name;
    ASSERT_EQ(0, std::memcmp(v.data(), nt.tensor.data(), v.nbytes())) << nt.name;
  }
  // Zero copy: the view points into the mapping (8-byte header length + header + offset).
  const TensorInfo* info = f->find("scalar");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(f->tensor("scalar").at(0), 2.5);
  EXPECT_THROW(f->tensor("nope"), Error);
}

TEST(Safetensors, EveryValidationPathNamesFileAndTensor) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(parse_error(image(ok, 8)), "");
  // Too short for the length prefix.
  EXPECT_NE(parse_error("abc").find("truncated"), std::string::npos);
  // Header length beyond the file, and beyond the format's limit.
  std::string big = image(ok, 8);
  big[0] = '\xff';
  big[1] = '\xff';
  EXPECT_NE(parse_error(big).find("truncated"), std::string::npos);
  std::string huge = image(ok, 8);
  for (int i = 0; i < 8; ++i) huge[i] = '\x7f';
  EXPECT_NE(parse_error(huge).find("exceeds the limit"), std::string::npos);
  // Malformed JSON, not an object.
  EXPECT_NE(parse_error(image(R"({"a":)", 0)).find("malformed"), std::string::npos);
  EXPECT_NE(parse_error(image(R"([1,2])", 0)).find("not a JSON object"), std::string::npos);
  // Unknown dtype, shape/span mismatch, span beyond the data, begin > end, negative dims, missing fields.
  auto err = [&](const std::string& h, size_t payload) { return parse_error(image(h, payload)); };
  std::string e = err(R"({"w":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", 2);
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos);
  EXPECT_NE(e.find("unknown dtype 'F8'"), std::string::npos);
  EXPECT_NE(err(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8).find("needs 12 bytes"), std::string::npos);
  EXPECT_NE(err(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4).find("beyond the end"), std::string::npos);
  EXPECT_NE(err(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8).find("begin 8 > end 0"), std::string::npos);
  EXPECT_NE(err(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8).find("non-negative"), std::string::npos);
  EXPECT_NE(err(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8).find("'shape'"), std::string::npos);
  EXPECT_NE(err(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8).find("data_offsets"), std::string::npos);
  EXPECT_NE(err(R"({"w":[1]})", 8).find("not an object"), std::string::npos);
  // Overlapping payloads.
  e = err(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
  EXPECT_NE(e.find("overlap"), std::string::npos);
  EXPECT_NE(e.find("'a'"), std::string::npos);
  // __metadata__ must be a string map; it is otherwise allowed.
  EXPECT_NE(err(R"({"__metadata__":{"k":1}})", 0).find("__metadata__"), std::string::npos);
  EXPECT_EQ(err(R"({"__metadata__":{"k":"v"}})", 0), "");
  // Huge shapes cannot overflow the size check.
  EXPECT_NE(err(R"({"w":{"dtype":"F64","shape":[281474976710656,281474976710656],"data_offsets":[0,8]}})", 8), "");
}

TEST(Safetensors, ShardedCheckpointAndItsProblems) {
  std::string d = tmpdir("shard");
  Tensor a = Tensor::from_f32({2}, {1, 2}), b = Tensor::from_f32({3}, {3, 4, 5}), c = Tensor::from_f32({1}, {6});
  write_safetensors(d + "/m-00001-of-00002.safetensors", {{"a", a}, {"b", b}});
  write_safetensors(d + "/m-00002-of-00002.safetensors", {{"c", c}});
  nlohmann::json idx = {{"metadata", {{"total_size", 24}}},
                        {"weight_map", {{"a", "m-00001-of-00002.safetensors"}, {"b", "m-00001-of-00002.safetensors"},
                                        {"c", "m-00002-of-00002.safetensors"}}}};
  std::ofstream(d + "/m.safetensors.index.json") << idx.dump();
  Checkpoint ck = Checkpoint::open(d);
  EXPECT_TRUE(ck.sharded());
  EXPECT_EQ(ck.shard_count(), 2u);
  EXPECT_EQ(ck.tensor_count(), 3u);
  EXPECT_EQ(ck.param_count(), 6u);
  EXPECT_EQ(ck.get("c").at(0), 6.0);
  EXPECT_EQ(ck.bytes_per_dtype().at(DType::F32), 24u);
  try {
    ck.get("zz");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'zz' is missing"), std::string::npos);
  }
  // A missing shard throws normally and is one problem line in inspect mode.
  fs::remove(d + "/m-00002-of-00002.safetensors");
  EXPECT_THROW(Checkpoint::open(d), Error);
  Checkpoint ins = Checkpoint::open(d, true);
  ASSERT_EQ(ins.problems().size(), 1u);
  EXPECT_NE(ins.problems()[0].find("m-00002-of-00002.safetensors: shard listed in"), std::string::npos);
  EXPECT_TRUE(ins.unavailable("c"));
  // A truncated shard.
  write_safetensors(d + "/m-00002-of-00002.safetensors", {{"c", c}});
  fs::resize_file(d + "/m-00002-of-00002.safetensors", fs::file_size(d + "/m-00002-of-00002.safetensors") - 2);
  Checkpoint tr = Checkpoint::open(d, true);
  ASSERT_EQ(tr.problems().size(), 1u);
  EXPECT_NE(tr.problems()[0].find("truncated"), std::string::npos);
  // A tensor the index lists but its shard lacks.
  write_safetensors(d + "/m-00002-of-00002.safetensors", {{"renamed", c}});
  Checkpoint rn = Checkpoint::open(d, true);
  ASSERT_EQ(rn.problems().size(), 1u);
  EXPECT_NE(rn.problems()[0].find("'c' is listed in the index but absent"), std::string::npos);
}
