// TensorStore: every tensor of a model directory, from model.safetensors or from the shards that
// model.safetensors.index.json lists (each shard checked to exist and to hold what it is said to).
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nibble/error.h"
#include "nibble/safetensors.h"

namespace nibble {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json read_index(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open", path.string()));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(fmt::format("{}: missing \"weight_map\" object", path.string()));
  return j;
}

// A shard name must stay inside the model directory.
void check_shard_name(const std::string& shard, const std::string& tensor, const fs::path& index) {
  const fs::path p(shard);
  bool bad = shard.empty() || p.is_absolute();
  for (const auto& part : p) bad = bad || part == "..";
  if (bad)
    throw Error(fmt::format("{}: tensor \"{}\" names an invalid shard \"{}\"", index.string(),
                            tensor, shard));
}

}  // namespace

TensorStore TensorStore::open_dir(const fs::path& dir) {
  if (!fs::is_directory(dir))
    throw Error(fmt::format("{}: not a directory (expected a model directory)", dir.string()));
  TensorStore s;
  s.dir_ = dir;
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(single)) {
    s.files_.push_back(SafetensorsFile::open(single));
    for (const auto& [name, view] : s.files_[0]->tensors()) s.index_[name] = &view;
  } else if (fs::exists(index)) {
    const json j = read_index(index);
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
    for (const auto& [name, shard_json] : j["weight_map"].items()) {
      if (!shard_json.is_string())
        throw Error(fmt::format("{}: weight_map entry \"{}\" must be a file name", index.string(),
                                name));
      const std::string shard = shard_json.get<std::string>();
      check_shard_name(shard, name, index);
      auto& file = shards[shard];
      if (!file) {
        if (!fs::exists(dir / shard))
          throw Error(fmt::format("{}: shard \"{}\" (listed for tensor \"{}\") does not exist",
                                  index.string(), shard, name));
        file = SafetensorsFile::open(dir / shard);
        s.files_.push_back(file);
      }
      const TensorView* v = file->find(name);
      if (!v)
        throw Error(fmt::format("{}: tensor \"{}\" is listed in shard \"{}\", which lacks it",
                                index.string(), name, shard));
      s.index_[name] = v;
    }
    if (s.files_.empty()) throw Error(fmt::format("{}: weight_map is empty", index.string()));
  } else {
    throw Error(fmt::format("{}: no model.safetensors or model.safetensors.index.json",
                            dir.string()));
  }
  s.metadata_ = s.files_[0]->metadata();
  return s;
}

const TensorView* TensorStore::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorView& TensorStore::at(const std::string& name) const {
  if (const TensorView* v = find(name)) return *v;
  throw Error(fmt::format("{}: model has no tensor named \"{}\"", dir_.string(), name));
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, _] : index_) out.push_back(name);
  return out;
}

const std::map<std::string, std::string>& TensorStore::metadata_of(const std::string& name) const {
  const TensorView& v = at(name);
  for (const auto& f : files_)
    if (f->find(name) == &v) return f->metadata();
  throw Error(fmt::format("{}: tensor \"{}\" belongs to no open file", dir_.string(), name));
}

}  // namespace nibble
