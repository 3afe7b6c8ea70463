#pragma once
// safetensors reading (memory-mapped, fully validated) and writing.
// Every malformed input throws nibble::Error naming the file and the field at fault.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace nibble {

enum class DType { F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U8, BOOL, U16, U32, U64 };

const char* dtype_name(DType t);               // "F32", "BF16", ...
DType dtype_from_name(const std::string& s);   // throws nibble::Error on unknown names
size_t dtype_size(DType t);

// A tensor inside a mapped file: valid while its SafetensorsFile lives.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::string file;  // for error messages

  int64_t numel() const;
  std::vector<float> to_float() const;  // F32/F16/BF16/F64 -> float; other dtypes throw
  void to_float(float* out) const;      // same, into out[numel()]
};

class SafetensorsFile {
 public:
  // Maps and validates: header length bound, JSON, dtype x shape == byte length, offsets inside
  // the data section, no overlaps.
  static std::shared_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  ~SafetensorsFile();

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const TensorView* find(const std::string& name) const;
  const TensorView& at(const std::string& name) const;  // throws naming the file and tensor

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, TensorView> tensors_;
};

// All tensors of a model directory: model.safetensors, or the shards listed in
// model.safetensors.index.json (validated: every listed shard exists and holds its tensors).
class TensorStore {
 public:
  static TensorStore open_dir(const std::filesystem::path& dir);
  const TensorView* find(const std::string& name) const;
  const TensorView& at(const std::string& name) const;  // throws naming the directory and tensor
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }  // first file's
  // The __metadata__ of the file that holds `name` (throws naming the directory and tensor).
  const std::map<std::string, std::string>& metadata_of(const std::string& name) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
  std::map<std::string, std::string> metadata_;
};

// Builds a safetensors file in memory and writes it (atomically: temp file + rename).
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes);  // throws if byte length and shape disagree / name repeats
  void add_f32(const std::string& name, std::vector<int64_t> shape, const float* data);
  void set_metadata(const std::string& key, const std::string& value);
  void write(const std::filesystem::path& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace nibble
