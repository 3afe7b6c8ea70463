#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "nibble/error.h"
#include "tokenizer/pair_merge.h"
#include "tokenizer/utf8.h"

namespace nibble::tok {
namespace {

using json = nlohmann::json;

bool is_set(const json& spec, const char* key) {
  return spec.contains(key) && !spec.at(key).is_null();
}

// Options that change the result and that nibble does not implement.
void reject_unsupported(const json& spec, const std::string& file) {
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (is_set(spec, key) && !spec.at(key).get<std::string>().empty())
      throw Error(fmt::format("{}: BPE option {} is not supported", file, key));
  if (is_set(spec, "dropout") && spec.at("dropout").get<double>() > 0.0)
    throw Error(fmt::format("{}: BPE dropout is not supported", file));
}

}  // namespace

BpeModel::BpeModel(const json& spec, const std::string& file) {
  try {
    const std::string type = spec.value("type", "BPE");
    if (type != "BPE")
      throw Error(fmt::format("{}: unsupported model type \"{}\" (only BPE)", file, type));
    reject_unsupported(spec, file);
    for (const auto& [token, id] : spec.at("vocab").items()) vocab_.emplace(token, id.get<int32_t>());
    if (is_set(spec, "unk_token")) {
      const std::string unk = spec.at("unk_token").get<std::string>();
      auto it = vocab_.find(unk);
      if (it == vocab_.end())
        throw Error(fmt::format("{}: BPE unk_token \"{}\" is not in the vocab", file, unk));
      unk_id_ = it->second;
    }
    fuse_unk_ = spec.value("fuse_unk", false);
    byte_fallback_ = spec.value("byte_fallback", false);
    ignore_merges_ = spec.value("ignore_merges", false);
    load_merges(spec.at("merges"), file);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed BPE model: {}", file, e.what()));
  }
}

void BpeModel::load_merges(const json& merges, const std::string& file) {
  merges_.reserve(merges.size());
  auto id_of = [&](const std::string& tok, size_t rank) {
    auto it = vocab_.find(tok);
    if (it == vocab_.end())
      throw Error(fmt::format("{}: merge {} uses \"{}\", which is not in the vocab", file, rank, tok));
    return it->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    std::string a, b;
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        throw Error(fmt::format("{}: merge {} \"{}\" is not two tokens", file, rank, s));
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2) {  // ["a", "b"]
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      throw Error(fmt::format("{}: merge {} is neither \"a b\" nor [a, b]", file, rank));
    }
    // As in the tokenizers library, a repeated pair keeps its last rank.
    const int32_t left = id_of(a, rank), right = id_of(b, rank), merged = id_of(a + b, rank);
    merges_[pair_key(left, right)] = {int32_t(rank), merged};
  }
}

const BpeModel::Merge* BpeModel::find_merge(int32_t a, int32_t b) const {
  auto it = merges_.find(pair_key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& ids) const {
  bool prev_unk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t len = utf8_step(word, i).len;
    const std::string_view ch = word.substr(i, len);
    i += len;
    if (auto it = vocab_.find(ch); it != vocab_.end()) {
      ids.push_back(it->second);
      prev_unk = false;
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (unsigned char c : ch) {
        auto it = vocab_.find(fmt::format("<0x{:02X}>", c));
        if (it == vocab_.end()) break;
        bytes.push_back(it->second);
      }
      if (bytes.size() == ch.size()) {
        ids.insert(ids.end(), bytes.begin(), bytes.end());
        prev_unk = false;
        continue;
      }
    }
    if (unk_id_) {  // with fuse_unk a run of unknown characters is one unk
      if (!(fuse_unk_ && prev_unk)) ids.push_back(*unk_id_);
      prev_unk = true;
    }
    // Neither byte fallback nor unk: the character is dropped, as the tokenizers library does.
  }
}

void BpeModel::merge_all(std::vector<int32_t>& ids) const {
  merge_pairs(ids, [this](int32_t a, int32_t b) -> std::optional<PairMerge> {
    if (const Merge* m = find_merge(a, b)) return PairMerge{double(m->rank), m->new_id};
    return std::nullopt;
  });
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> ids;
  initial_symbols(word, ids);
  merge_all(ids);
  out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace nibble::tok
