#include "formats/gguf_test_builder.h"

#include "formats/gguf.h"

namespace tpserve {
namespace {

template <typename T>
std::string Le(T value) {
  std::string out;
  AppendLe(out, value);
  return out;
}

std::string ArrayHeader(GgufValueType element_type, uint64_t count) {
  std::string out;
  AppendLe(out, static_cast<uint32_t>(element_type));
  AppendLe(out, count);
  return out;
}

}  // namespace

std::string GgufString(const std::string& s) {
  std::string out;
  AppendLe(out, static_cast<uint64_t>(s.size()));
  out += s;
  return out;
}

GgufTestBuilder& GgufTestBuilder::SetVersion(uint32_t version) {
  version_ = version;
  return *this;
}

GgufTestBuilder& GgufTestBuilder::AddRawKv(const std::string& key, GgufValueType type,
                                           std::string value) {
  kvs_.push_back({key, type, std::move(value)});
  return *this;
}

GgufTestBuilder& GgufTestBuilder::AddU8(const std::string& k, uint8_t v) {
  return AddRawKv(k, GgufValueType::kU8, Le(v));
}
GgufTestBuilder& GgufTestBuilder::AddI8(const std::string& k, int8_t v) {
  return AddRawKv(k, GgufValueType::kI8, Le(v));
}
GgufTestBuilder& GgufTestBuilder::AddU16(const std::string& k, uint16_t v) {
  return AddRawKv(k, GgufValueType::kU16, Le(v));
}
GgufTestBuilder& GgufTestBuilder::AddI16(const std::string& k, int16_t v) {
  return AddRawKv(k, GgufValueType::kI16, Le(v));
}
GgufTestBuilder& GgufTestBuilder::AddU32(const std::string& k, uint32_t v) {
  if (k == "general.alignment") alignment_bytes_ = v;
  return AddRawKv(k, GgufValueType::kU32, Le(v));
}
GgufTestBuilder& GgufTestBuilder::AddI32(const std::string& k, int32_t v) {
  return AddRawKv(k, GgufValueType::kI32, Le(v));
}
GgufTestBuilder& GgufTestBuilder::AddU64(const std::string& k, uint64_t v) {
  return AddRawKv(k, GgufValueType::kU64, Le(v));
}
GgufTestBuilder& GgufTestBuilder::AddI64(const std::string& k, int64_t v) {
  return AddRawKv(k, GgufValueType::kI64, Le(v));
}
GgufTestBuilder& GgufTestBuilder::AddF32(const std::string& k, float v) {
  return AddRawKv(k, GgufValueType::kF32, Le(v));
}
GgufTestBuilder& GgufTestBuilder::AddF64(const std::string& k, double v) {
  return AddRawKv(k, GgufValueType::kF64, Le(v));
}
GgufTestBuilder& GgufTestBuilder::AddBool(const std::string& k, bool v) {
  return AddRawKv(k, GgufValueType::kBool, Le(static_cast<uint8_t>(v ? 1 : 0)));
}
GgufTestBuilder& GgufTestBuilder::AddString(const std::string& k, const std::string& v) {
  return AddRawKv(k, GgufValueType::kString, GgufString(v));
}

GgufTestBuilder& GgufTestBuilder::AddStringArray(const std::string& k,
                                                 const std::vector<std::string>& v) {
  std::string value = ArrayHeader(GgufValueType::kString, v.size());
  for (const std::string& s : v) value += GgufString(s);
  return AddRawKv(k, GgufValueType::kArray, std::move(value));
}

GgufTestBuilder& GgufTestBuilder::AddI32Array(const std::string& k, const std::vector<int32_t>& v) {
  std::string value = ArrayHeader(GgufValueType::kI32, v.size());
  for (int32_t x : v) AppendLe(value, x);
  return AddRawKv(k, GgufValueType::kArray, std::move(value));
}

GgufTestBuilder& GgufTestBuilder::AddF32Array(const std::string& k, const std::vector<float>& v) {
  std::string value = ArrayHeader(GgufValueType::kF32, v.size());
  for (float x : v) AppendLe(value, x);
  return AddRawKv(k, GgufValueType::kArray, std::move(value));
}

GgufTestBuilder& GgufTestBuilder::AddTensor(const std::string& name, uint32_t ggml_type,
                                            const std::vector<uint64_t>& ggml_dims,
                                            const std::string& data) {
  tensors_.push_back({name, ggml_type, ggml_dims, data});
  return *this;
}

std::string GgufTestBuilder::Build() {
  layout_ = Layout{};
  std::string out;
  AppendLe(out, GgufFile::kMagic);
  AppendLe(out, version_);
  AppendLe(out, static_cast<uint64_t>(tensors_.size()));
  AppendLe(out, static_cast<uint64_t>(kvs_.size()));
  for (const Kv& kv : kvs_) {
    KvLayout kl;
    kl.key_length_field = out.size();
    out += GgufString(kv.key);
    kl.type_field = out.size();
    AppendLe(out, static_cast<uint32_t>(kv.type));
    kl.value_field = out.size();
    out += kv.value;
    layout_.kvs.push_back(kl);
  }
  const uint64_t a = alignment_bytes_ == 0 ? 1 : alignment_bytes_;
  uint64_t next_offset = 0;
  for (const Tensor& t : tensors_) {
    TensorLayout tl;
    tl.name_length_field = out.size();
    out += GgufString(t.name);
    tl.n_dims_field = out.size();
    AppendLe(out, static_cast<uint32_t>(t.dims.size()));
    tl.dims_field = out.size();
    for (uint64_t d : t.dims) AppendLe(out, d);
    tl.type_field = out.size();
    AppendLe(out, t.ggml_type);
    tl.offset_field = out.size();
    AppendLe(out, next_offset);
    next_offset = (next_offset + t.data.size() + a - 1) / a * a;
    layout_.tensors.push_back(tl);
  }
  layout_.data_section = (out.size() + a - 1) / a * a;
  if (tensors_.empty()) return out;
  out.resize(layout_.data_section, '\0');
  for (const Tensor& t : tensors_) {
    out.resize((out.size() - layout_.data_section + a - 1) / a * a + layout_.data_section, '\0');
    out += t.data;
  }
  return out;
}

}  // namespace tpserve
