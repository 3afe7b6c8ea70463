#include "tokenizer/hf_special_ids.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "nibble/error.h"

namespace nibble::tok {
namespace {

using json = nlohmann::json;

json read_json_if_present(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return json();
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
}

// An id field: a number, or a list whose first entry is used.
void take_id(const json& j, const char* key, int32_t& id) {
  if (id >= 0 || !j.is_object() || !j.contains(key)) return;
  const json& v = j.at(key);
  if (v.is_number_integer())
    id = v.get<int32_t>();
  else if (v.is_array() && !v.empty() && v[0].is_number_integer())
    id = v[0].get<int32_t>();
}

// A token field: its text, or {"content": text}.
void take_token(const json& j, const char* key, const TokenMap& ids, int32_t& id) {
  if (id >= 0 || !j.is_object() || !j.contains(key)) return;
  const json& v = j.at(key);
  const json& text = v.is_object() ? v.value("content", json()) : v;
  if (!text.is_string()) return;
  if (auto it = ids.find(text.get<std::string>()); it != ids.end()) id = it->second;
}

}  // namespace

SpecialIds find_special_ids(const std::filesystem::path& dir, const TokenMap& token_ids) {
  SpecialIds s;
  for (const char* name : {"generation_config.json", "config.json"}) {
    const json j = read_json_if_present(dir / name);
    take_id(j, "bos_token_id", s.bos);
    take_id(j, "eos_token_id", s.eos);
  }
  const json tc = read_json_if_present(dir / "tokenizer_config.json");
  take_token(tc, "bos_token", token_ids, s.bos);
  take_token(tc, "eos_token", token_ids, s.eos);
  return s;
}

}  // namespace nibble::tok
