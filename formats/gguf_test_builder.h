// Test-only writer of GGUF bytes. It writes well-formed files by default and records where
// every field landed, so corrupt-file tests can patch one field of a valid file.
//
//   GgufTestBuilder b;
//   b.AddString("general.architecture", "llama").AddTensor("w", 0, {4, 2}, std::string(32, 0));
//   std::string bytes = b.Build();   // b.layout().tensors[0].offset_field is now known
//
// Thread-compatible.
#ifndef TPSERVE_FORMATS_GGUF_TEST_BUILDER_H_
#define TPSERVE_FORMATS_GGUF_TEST_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "formats/gguf_metadata.h"

namespace tpserve {

// Appends the little-endian bytes of a trivially copyable value.
template <typename T>
void AppendLe(std::string& out, T value) {
  char buf[sizeof(T)];
  std::memcpy(buf, &value, sizeof(T));
  out.append(buf, sizeof(T));
}

// Overwrites the bytes at `offset` with `value`. REQUIRES: the range lies inside `bytes`.
template <typename T>
void PatchLe(std::string& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// Encoded GGUF pieces, for hand-building values.
std::string GgufString(const std::string& s);

class GgufTestBuilder {
 public:
  struct KvLayout {
    size_t key_length_field = 0;
    size_t type_field = 0;
    size_t value_field = 0;  // for arrays: the element type field; the count follows it
  };
  struct TensorLayout {
    size_t name_length_field = 0;
    size_t n_dims_field = 0;
    size_t dims_field = 0;
    size_t type_field = 0;
    size_t offset_field = 0;
  };
  struct Layout {
    size_t version_field = 4;
    size_t tensor_count_field = 8;
    size_t kv_count_field = 16;
    std::vector<KvLayout> kvs;
    std::vector<TensorLayout> tensors;
    size_t data_section = 0;
  };

  GgufTestBuilder& SetVersion(uint32_t version);
  // Appends the value as already encoded (for arrays: element type, count, elements).
  GgufTestBuilder& AddRawKv(const std::string& key, GgufValueType type, std::string value);

  GgufTestBuilder& AddU8(const std::string& key, uint8_t v);
  GgufTestBuilder& AddI8(const std::string& key, int8_t v);
  GgufTestBuilder& AddU16(const std::string& key, uint16_t v);
  GgufTestBuilder& AddI16(const std::string& key, int16_t v);
  GgufTestBuilder& AddU32(const std::string& key, uint32_t v);
  GgufTestBuilder& AddI32(const std::string& key, int32_t v);
  GgufTestBuilder& AddU64(const std::string& key, uint64_t v);
  GgufTestBuilder& AddI64(const std::string& key, int64_t v);
  GgufTestBuilder& AddF32(const std::string& key, float v);
  GgufTestBuilder& AddF64(const std::string& key, double v);
  GgufTestBuilder& AddBool(const std::string& key, bool v);
  GgufTestBuilder& AddString(const std::string& key, const std::string& v);
  GgufTestBuilder& AddStringArray(const std::string& key, const std::vector<std::string>& v);
  GgufTestBuilder& AddI32Array(const std::string& key, const std::vector<int32_t>& v);
  GgufTestBuilder& AddF32Array(const std::string& key, const std::vector<float>& v);

  // `ggml_dims` innermost first; `data` must hold the tensor's bytes. Tensors are laid out in
  // order, each at the next multiple of the alignment (set general.alignment via AddU32 first
  // to change it from 32).
  GgufTestBuilder& AddTensor(const std::string& name, uint32_t ggml_type,
                             const std::vector<uint64_t>& ggml_dims, const std::string& data);

  // Encodes the file, filling layout(). The file ends at the last tensor's last byte.
  std::string Build();
  const Layout& layout() const { return layout_; }

 private:
  struct Kv {
    std::string key;
    GgufValueType type;
    std::string value;
  };
  struct Tensor {
    std::string name;
    uint32_t ggml_type;
    std::vector<uint64_t> dims;
    std::string data;
  };

  uint32_t version_ = 3;
  uint32_t alignment_bytes_ = 32;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
  Layout layout_;
};

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_GGUF_TEST_BUILDER_H_
