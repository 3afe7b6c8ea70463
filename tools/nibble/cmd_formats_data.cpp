// Loading the data the `nibble formats` measurements run on.
#include <charconv>
#include <filesystem>

#include <fmt/format.h>

#include "cmd_formats_common.h"
#include "nibble/error.h"

namespace nibble::cli::formats {
namespace {

ErrorSample sample_from(const TensorView& t) {
  if (t.shape.size() != 2 || !is_float_dtype(t.dtype))
    throw Error(fmt::format("{}: tensor {} is {} {}-D; expected a 2-D float tensor", t.file,
                            t.name, dtype_name(t.dtype), t.shape.size()));
  return ErrorSample{t.name, t.shape[0], t.shape[1], t.to_float()};
}

bool wanted(const TensorView& t) {
  return t.shape.size() == 2 && is_float_dtype(t.dtype) && t.numel() > 0;
}

// Splits "PATH[:TENSOR]": the whole text if it names an existing path, else at the last ':'.
std::pair<std::filesystem::path, std::string> split_path_tensor(const std::string& spec) {
  namespace fs = std::filesystem;
  if (fs::exists(spec)) return {spec, ""};
  const auto colon = spec.rfind(':');
  if (colon != std::string::npos && fs::exists(spec.substr(0, colon)))
    return {spec.substr(0, colon), spec.substr(colon + 1)};
  throw Error(fmt::format("--dist '{}': not a distribution (gaussian, laplace, student-t:NU) and "
                          "no such file or directory",
                          spec));
}

template <class Store>
std::vector<ErrorSample> samples_from(const Store& store, const std::vector<std::string>& names,
                                      const std::string& tensor, const std::string& where) {
  std::vector<ErrorSample> out;
  if (!tensor.empty()) {
    out.push_back(sample_from(store.at(tensor)));
    return out;
  }
  for (const auto& name : names)
    if (const TensorView* t = store.find(name); t && wanted(*t)) out.push_back(sample_from(*t));
  if (out.empty()) throw Error(where + ": no 2-D float tensors to measure");
  return out;
}

}  // namespace

bool is_float_dtype(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

LabData load_lab_data(const std::string& dist, int64_t rows, int64_t cols,
                      std::optional<uint64_t> seed) {
  LabData data;
  if (auto d = parse_distribution(dist)) {
    if (rows <= 0 || cols <= 0)
      throw Error(fmt::format("--rows/--cols must be positive (got {} x {})", rows, cols));
    data.seed = seed ? *seed : fresh_seed();
    data.description = fmt::format("{} {} x {} (seed {})", d->name(), rows, cols, *data.seed);
    data.samples.push_back({d->name(), rows, cols, random_values(*d, rows * cols, *data.seed)});
    return data;
  }
  auto [path, tensor] = split_path_tensor(dist);
  if (std::filesystem::is_directory(path)) {
    TensorStore store = TensorStore::open_dir(path);
    data.samples = samples_from(store, store.names(), tensor, path.string());
  } else {
    auto file = SafetensorsFile::open(path);
    std::vector<std::string> names;
    for (const auto& [name, view] : file->tensors()) names.push_back(name);
    data.samples = samples_from(*file, names, tensor, path.string());
  }
  int64_t n = 0;
  for (const auto& s : data.samples) n += int64_t(s.values.size());
  data.description = tensor.empty()
                         ? fmt::format("{}: {} 2-D tensors, {} values", path.string(),
                                       data.samples.size(), n)
                         : fmt::format("{}:{} ({} x {})", path.string(), tensor,
                                       data.samples[0].rows, data.samples[0].cols);
  return data;
}

std::pair<float, float> parse_sv_pair(const std::string& text, const std::string& option) {
  const auto comma = text.find(',');
  float v[2] = {0, 0};
  bool ok = comma != std::string::npos;
  const std::string parts[2] = {text.substr(0, comma), ok ? text.substr(comma + 1) : ""};
  for (int i = 0; ok && i < 2; ++i) {
    const char* b = parts[i].data();
    const char* e = b + parts[i].size();
    ok = !parts[i].empty() && std::from_chars(b, e, v[i]).ptr == e;
  }
  if (!ok) throw Error(fmt::format("{} '{}': expected two numbers A,B (e.g. 5,8)", option, text));
  return {v[0], v[1]};
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace nibble::cli::formats
