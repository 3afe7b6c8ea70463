// SafetensorsWriter: collects tensors in memory and writes one file atomically. The layout is the
// one the reference implementation produces (and requires when reading): tensors contiguous, sorted
// by element size (largest first) so each starts aligned to its element size, and the JSON header
// padded with spaces so the data section starts at a multiple of 8.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nibble/error.h"
#include "nibble/safetensors.h"

namespace nibble {

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  if (name.empty() || name == "__metadata__")
    throw Error(fmt::format("safetensors writer: invalid tensor name \"{}\"", name));
  for (const auto& e : entries_)
    if (e.name == name) throw Error(fmt::format("safetensors writer: tensor \"{}\" added twice", name));
  size_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(numel, size_t(d), &numel))
      throw Error(fmt::format("safetensors writer: tensor \"{}\" has an invalid shape", name));
  }
  if (numel * dtype_size(dtype) != bytes.size())
    throw Error(fmt::format("safetensors writer: tensor \"{}\": {} elements of {} need {} bytes, "
                            "got {}",
                            name, numel, dtype_name(dtype), numel * dtype_size(dtype),
                            bytes.size()));
  entries_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

void SafetensorsWriter::add_f32(const std::string& name, std::vector<int64_t> shape,
                                const float* data) {
  size_t numel = 1;
  for (int64_t d : shape) numel *= d < 0 ? 0 : size_t(d);
  std::vector<uint8_t> bytes(numel * sizeof(float));
  if (numel) std::memcpy(bytes.data(), data, bytes.size());
  add(name, DType::F32, std::move(shape), std::move(bytes));
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

namespace {

void write_all(std::FILE* f, const void* p, size_t n, const std::string& path) {
  if (n && std::fwrite(p, 1, n, f) != n)
    throw Error(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
}

}  // namespace

void SafetensorsWriter::write(const std::filesystem::path& path) const {
  std::vector<const Entry*> order;
  for (const auto& e : entries_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const Entry* e : order) {
    header[e->name] = {{"dtype", dtype_name(e->dtype)},
                       {"shape", e->shape},
                       {"data_offsets", {offset, offset + e->bytes.size()}}};
    offset += e->bytes.size();
  }
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();

  const std::string final_path = path.string();
  const std::string tmp = fmt::format("{}.tmp.{}", final_path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  try {
    write_all(f, &n, 8, tmp);
    write_all(f, text.data(), text.size(), tmp);
    for (const Entry* e : order) write_all(f, e->bytes.data(), e->bytes.size(), tmp);
    if (std::fflush(f) != 0 || fsync(fileno(f)) != 0)
      throw Error(fmt::format("{}: flush failed: {}", tmp, std::strerror(errno)));
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0 || std::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: cannot write: {}", final_path, why));
  }
}

}  // namespace nibble
