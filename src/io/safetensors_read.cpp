// SafetensorsFile: maps a .safetensors file read-only and validates its header completely before
// any tensor is handed out (bounds, dtypes, shapes, offsets, overlaps).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nibble/error.h"
#include "nibble/safetensors.h"

namespace nibble {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // 100 MB, as the reference implementation

using json = nlohmann::json;

// Keeps a mapping alive until ownership moves into the SafetensorsFile.
struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

void map_file(const std::filesystem::path& path, Mapping& m) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", path.string()));
  }
  const size_t size = size_t(st.st_size);
  if (size < 8) {
    ::close(fd);
    throw Error(fmt::format("{}: truncated safetensors file: {} bytes, the header length alone "
                            "takes 8",
                            path.string(), size));
  }
  void* addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (addr == MAP_FAILED)
    throw Error(fmt::format("{}: mmap failed: {}", path.string(), std::strerror(errno)));
  m.addr = addr;
  m.size = size;
}

std::vector<int64_t> parse_shape(const json& j, const std::string& where, size_t& numel) {
  if (!j.is_array()) throw Error(fmt::format("{}: \"shape\" must be an array", where));
  std::vector<int64_t> shape;
  numel = 1;
  for (const auto& d : j) {
    if (!d.is_number_integer())
      throw Error(fmt::format("{}: \"shape\" entries must be integers, got {}", where, d.dump()));
    if (d.is_number_unsigned() ? d.get<uint64_t>() > uint64_t(INT64_MAX) : d.get<int64_t>() < 0)
      throw Error(fmt::format("{}: \"shape\" has an invalid dimension {}", where, d.dump()));
    const int64_t v = d.get<int64_t>();
    if (__builtin_mul_overflow(numel, size_t(v), &numel))
      throw Error(fmt::format("{}: \"shape\" {} overflows the element count", where, j.dump()));
    shape.push_back(v);
  }
  return shape;
}

std::pair<uint64_t, uint64_t> parse_offsets(const json& j, const std::string& where) {
  if (!j.is_array() || j.size() != 2 || !j[0].is_number_unsigned() || !j[1].is_number_unsigned())
    throw Error(fmt::format("{}: \"data_offsets\" must be [begin, end] of non-negative integers, "
                            "got {}",
                            where, j.dump()));
  return {j[0].get<uint64_t>(), j[1].get<uint64_t>()};
}

const json& required(const json& entry, const char* field, const std::string& where) {
  auto it = entry.find(field);
  if (it == entry.end()) throw Error(fmt::format("{}: missing \"{}\"", where, field));
  return *it;
}

TensorView parse_entry(const std::string& name, const json& entry, const std::string& file,
                       const uint8_t* data, size_t data_size) {
  const std::string where = fmt::format("{}: tensor \"{}\"", file, name);
  if (!entry.is_object()) throw Error(fmt::format("{}: entry must be a JSON object", where));
  const json& dt = required(entry, "dtype", where);
  if (!dt.is_string()) throw Error(fmt::format("{}: \"dtype\" must be a string", where));
  TensorView v;
  v.name = name;
  v.file = file;
  try {
    v.dtype = dtype_from_name(dt.get<std::string>());
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", where, e.what()));
  }
  size_t numel = 0;
  v.shape = parse_shape(required(entry, "shape", where), where, numel);
  auto [begin, end] = parse_offsets(required(entry, "data_offsets", where), where);
  if (begin > end)
    throw Error(fmt::format("{}: data_offsets [{}, {}] has begin after end", where, begin, end));
  if (end > data_size)
    throw Error(fmt::format("{}: data_offsets end {} is past the data section ({} bytes)", where,
                            end, data_size));
  size_t expect = 0;
  if (__builtin_mul_overflow(numel, dtype_size(v.dtype), &expect))
    throw Error(fmt::format("{}: shape {} overflows the byte count", where, entry["shape"].dump()));
  if (expect != end - begin)
    throw Error(fmt::format("{}: shape {} of {} needs {} bytes but data_offsets [{}, {}] hold {}",
                            where, entry["shape"].dump(), dtype_name(v.dtype),
                            expect, begin, end, end - begin));
  v.data = data + begin;
  v.nbytes = end - begin;
  return v;
}

std::map<std::string, std::string> parse_metadata(const json& j, const std::string& file) {
  if (!j.is_object())
    throw Error(fmt::format("{}: \"__metadata__\" must be an object of strings", file));
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string())
      throw Error(fmt::format("{}: \"__metadata__\" value of \"{}\" must be a string", file, k));
    out[k] = v.get<std::string>();
  }
  return out;
}

void check_no_overlap(const std::map<std::string, TensorView>& tensors, const std::string& file) {
  std::vector<const TensorView*> order;
  for (const auto& [_, v] : tensors)
    if (v.nbytes > 0) order.push_back(&v);
  std::sort(order.begin(), order.end(),
            [](const TensorView* a, const TensorView* b) { return a->data < b->data; });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i - 1]->data + order[i - 1]->nbytes > order[i]->data)
      throw Error(fmt::format("{}: tensors \"{}\" and \"{}\" overlap", file, order[i - 1]->name,
                              order[i]->name));
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string file = path.string();
  Mapping m;
  map_file(path, m);
  const auto* base = static_cast<const uint8_t*>(m.addr);
  uint64_t n = 0;
  std::memcpy(&n, base, 8);
  if (n > kMaxHeaderBytes)
    throw Error(fmt::format("{}: header length {} exceeds the 100 MB limit", file, n));
  if (n > m.size - 8)
    throw Error(fmt::format("{}: header length {} runs past the end of the file ({} bytes)", file,
                            n, m.size));
  json header;
  try {
    header = json::parse(base + 8, base + 8 + n);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: header is not valid JSON: {}", file, e.what()));
  }
  if (!header.is_object()) throw Error(fmt::format("{}: header is not a JSON object", file));

  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const uint8_t* data = base + 8 + n;
  const size_t data_size = m.size - 8 - n;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__")
      f->metadata_ = parse_metadata(entry, file);
    else
      f->tensors_.emplace(name, parse_entry(name, entry, file, data, data_size));
  }
  check_no_overlap(f->tensors_, file);
  f->map_ = m.addr;
  f->map_size_ = m.size;
  m.addr = nullptr;  // owned by f now
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, map_size_);
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorView& SafetensorsFile::at(const std::string& name) const {
  if (const TensorView* v = find(name)) return *v;
  throw Error(fmt::format("{}: no tensor named \"{}\"", path_.string(), name));
}

}  // namespace nibble
