// Streams random tensors into sharded safetensors files: the header is known from the shapes, the
// data is generated in slabs while the previous slab is written (a background write overlaps the
// OpenMP fill), so memory stays at two slabs whatever the model size.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/init_random_parts.h"
#include "nibble/error.h"

namespace nibble::init_random_detail {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kSlabElements = 256 * kChunk;  // 16 Mi elements per slab

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

void write_all(std::FILE* f, const void* p, size_t n, const fs::path& path) {
  if (n && std::fwrite(p, 1, n, f) != n)
    throw Error(fmt::format("{}: write failed: {}", path.string(), std::strerror(errno)));
}

// Consecutive tensors grouped into shards of at most max_bytes (a larger tensor alone).
std::vector<std::vector<size_t>> plan_shards(const std::vector<RandomTensor>& ts, size_t esize, uint64_t max_bytes) {
  std::vector<std::vector<size_t>> shards;
  uint64_t used = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const uint64_t b = uint64_t(ts[i].numel()) * esize;
    if (shards.empty() || (used > 0 && used + b > max_bytes)) shards.emplace_back(), used = 0;
    shards.back().push_back(i);
    used += b;
  }
  return shards;
}

std::string shard_header(const std::vector<RandomTensor>& ts, const std::vector<size_t>& members, DType dtype) {
  nlohmann::json h;
  h["__metadata__"] = {{"format", "pt"}, {"nibble", "init-random: RANDOM weights"}};
  uint64_t off = 0;
  for (size_t i : members) {
    const uint64_t b = uint64_t(ts[i].numel()) * dtype_size(dtype);
    h[ts[i].name] = {{"dtype", dtype_name(dtype)}, {"shape", ts[i].shape}, {"data_offsets", {off, off + b}}};
    off += b;
  }
  std::string s = h.dump();
  s.append((8 - s.size() % 8) % 8, ' ');  // data section starts 8-byte aligned
  return s;
}

class ShardStreamer {
 public:
  ShardStreamer(uint64_t seed, DType dtype, const std::function<void(uint64_t)>& on_bytes)
      : seed_(seed), dtype_(dtype), esize_(dtype_size(dtype)), on_bytes_(on_bytes) {
    for (auto& b : buf_) b.resize(size_t(kSlabElements) * esize_);
  }

  void write(const fs::path& path, const std::vector<RandomTensor>& ts, const std::vector<size_t>& members) {
    const fs::path part = path.string() + ".part";
    File f(std::fopen(part.c_str(), "wb"));
    if (!f) throw Error(fmt::format("{}: cannot create: {}", part.string(), std::strerror(errno)));
    const std::string header = shard_header(ts, members, dtype_);
    const uint64_t hlen = header.size();  // little-endian host
    write_all(f.get(), &hlen, 8, part);
    write_all(f.get(), header.data(), header.size(), part);
    try {
      for (size_t i : members) stream_tensor(f.get(), ts[i], part);
      flush();
    } catch (...) {
      if (pending_.valid()) pending_.wait();  // the background write still uses f
      f.reset();
      std::error_code ec;
      fs::remove(part, ec);
      throw;
    }
    if (std::fclose(f.release()) != 0)
      throw Error(fmt::format("{}: write failed: {}", part.string(), std::strerror(errno)));
    fs::rename(part, path);
  }

 private:
  void stream_tensor(std::FILE* f, const RandomTensor& t, const fs::path& path) {
    const int64_t n = t.numel();
    for (int64_t first = 0; first < n; first += kSlabElements) {
      const int64_t len = std::min(kSlabElements, n - first);
      std::vector<uint8_t>& b = buf_[next_];
      fill_random(t, seed_, first, len, dtype_, b.data());  // overlaps the pending write
      flush();
      pending_ = std::async(std::launch::async, [f, &b, len, this, path] { write_all(f, b.data(), size_t(len) * esize_, path); });
      written_ += uint64_t(len) * esize_;
      next_ ^= 1;
    }
  }
  void flush() {
    if (pending_.valid()) pending_.get();
    if (on_bytes_) on_bytes_(written_);
  }

  uint64_t seed_;
  DType dtype_;
  size_t esize_;
  const std::function<void(uint64_t)>& on_bytes_;
  std::vector<uint8_t> buf_[2];
  int next_ = 0;
  std::future<void> pending_;
  uint64_t written_ = 0;
};

}  // namespace

ShardResult write_random_shards(const fs::path& dir, const std::vector<RandomTensor>& tensors, uint64_t seed,
                                DType dtype, uint64_t max_shard_bytes, const std::function<void(uint64_t)>& on_bytes) {
  const auto shards = plan_shards(tensors, dtype_size(dtype), max_shard_bytes);
  const int n = int(shards.size());
  ShardStreamer streamer(seed, dtype, on_bytes);
  nlohmann::json weight_map = nlohmann::json::object();
  ShardResult r{n, 0};
  for (int s = 0; s < n; ++s) {
    const std::string name = n == 1 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n);
    streamer.write(dir / name, tensors, shards[size_t(s)]);
    for (size_t i : shards[size_t(s)]) {
      weight_map[tensors[i].name] = name;
      r.bytes += uint64_t(tensors[i].numel()) * dtype_size(dtype);
    }
  }
  if (n > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", r.bytes}}}, {"weight_map", weight_map}};
    const fs::path path = dir / "model.safetensors.index.json";
    File f(std::fopen(path.c_str(), "wb"));
    if (!f) throw Error(fmt::format("{}: cannot create: {}", path.string(), std::strerror(errno)));
    const std::string text = index.dump(2) + "\n";
    write_all(f.get(), text.data(), text.size(), path);
  }
  return r;
}

}  // namespace nibble::init_random_detail
