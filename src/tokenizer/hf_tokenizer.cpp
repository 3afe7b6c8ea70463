// Hugging Face tokenizer.json with a byte-level BPE model (GPT-2 / SmolLM2 style): added tokens,
// pre_tokenizer, BPE, ByteLevel decoder. Encoding gives the ids of the tokenizers library
// with add_special_tokens=False; decoding keeps special tokens (skip_special_tokens=False).
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "nibble/error.h"
#include "nibble/tokenizer.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/hf_added_tokens.h"
#include "tokenizer/hf_pre_tokenizer.h"
#include "tokenizer/hf_special_ids.h"
#include "tokenizer/hf_token_texts.h"
#include "tokenizer/utf8.h"

namespace nibble {
namespace {

using json = nlohmann::json;
using tok::TextPiece;

json read_tokenizer_json(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open tokenizer file", file.string()));
  try {
    json j = json::parse(in);
    if (!j.is_object()) throw Error(fmt::format("{}: not a tokenizer.json object", file.string()));
    return j;
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
}

// Components nibble does not implement must not be silently ignored. Returns the "model".
const json& supported_model(const json& j, const std::string& file) {
  if (j.contains("normalizer") && !j["normalizer"].is_null())
    throw Error(fmt::format("{}: unsupported normalizer type \"{}\"", file,
                            j["normalizer"].value("type", "?")));
  if (!j.contains("model")) throw Error(fmt::format("{}: no \"model\"", file));
  const json& dec = j.value("decoder", json());
  if (!dec.is_object() || dec.value("type", "") != "ByteLevel")
    throw Error(fmt::format("{}: unsupported decoder type \"{}\" (only ByteLevel)", file,
                            dec.is_object() ? dec.value("type", "?") : std::string("null")));
  // post_processor, truncation and padding only add special tokens / cut / pad batches, which
  // encode() never does, so they are ignored.
  return j.at("model");
}

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(const std::filesystem::path& path, const json& spec)
      : file_(path.string()),
        model_(supported_model(spec, file_), file_),
        pre_(spec.value("pre_tokenizer", json()), file_) {
    auto added = tok::parse_added_tokens(spec.value("added_tokens", json()), file_);
    std::vector<tok::AddedToken> raw, normalized;
    for (const auto& t : added) (t.normalized ? normalized : raw).push_back(t);
    raw_matcher_ = std::make_unique<tok::AddedTokenMatcher>(std::move(raw));
    normalized_matcher_ = std::make_unique<tok::AddedTokenMatcher>(std::move(normalized));
    texts_ = tok::HfTokenTexts(model_.vocab(), added, file_);
    tok::TokenMap ids = model_.vocab();
    for (const auto& t : added) ids[t.content] = t.id;
    const tok::SpecialIds s = tok::find_special_ids(path.parent_path(), ids);
    bos_ = checked_special(s.bos, "bos");
    eos_ = checked_special(s.eos, "eos");
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    tok::check_utf8(text, "tokenizer input text");
    std::vector<TextPiece> raw_cut, cut;
    raw_matcher_->split(text, raw_cut);
    for (const TextPiece& p : raw_cut) {
      if (p.id >= 0)
        cut.push_back(p);
      else  // no normalizer, so the normalized tokens match on the same text
        normalized_matcher_->split(p.text, cut);
    }
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3);
    WordCache cache;
    std::vector<std::string> words;
    for (const TextPiece& p : cut) {
      if (p.id >= 0) {
        ids.push_back(p.id);
        continue;
      }
      words.clear();
      pre_.split(p.text, words);
      for (const std::string& w : words) encode_word_cached(w, cache, ids);
    }
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string bytes;
    for (int32_t id : ids) bytes += texts_.bytes(id);
    return tok::utf8_lossy(bytes);  // byte-level tokens can end mid-character
  }

  std::string token_text(int32_t id) const override { return texts_.bytes(id); }
  int32_t vocab_size() const override { return texts_.size(); }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }

 private:
  using WordCache = std::unordered_map<std::string, std::vector<int32_t>>;

  // Words repeat a lot in real text: BPE each distinct word once per encode() call.
  void encode_word_cached(const std::string& word, WordCache& cache,
                          std::vector<int32_t>& ids) const {
    auto it = cache.find(word);
    if (it == cache.end()) {
      std::vector<int32_t> w;
      model_.encode_word(word, w);
      it = cache.emplace(word, std::move(w)).first;
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }

  int32_t checked_special(int32_t id, const char* which) const {
    if (id >= texts_.size())
      throw Error(fmt::format("{}: {} id {} is outside the vocab of {} tokens (from the config "
                              "files beside it)", file_, which, id, texts_.size()));
    return id;
  }

  std::string file_;
  tok::BpeModel model_;
  tok::HfPreTokenizer pre_;
  std::unique_ptr<tok::AddedTokenMatcher> raw_matcher_, normalized_matcher_;
  tok::HfTokenTexts texts_;
  int32_t bos_ = -1, eos_ = -1;
};

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::filesystem::path& tokenizer_json) {
  return std::make_unique<HfTokenizer>(tokenizer_json, read_tokenizer_json(tokenizer_json));
}

}  // namespace nibble
