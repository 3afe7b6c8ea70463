// llama2.c's tokenizer.bin: int32 max_token_length, then per token a float score, an int32 byte
// length and the bytes (SentencePiece pieces with U+2581 already turned into spaces). Encoding
// follows llama2.c's encode(): a dummy-prefix " " token, one token per UTF-8 character (unknown
// characters as byte tokens <0xXX>, ids 3..258), then the highest-score merges (tokenizer/pair_merge.h).
#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "nibble/error.h"
#include "nibble/tokenizer.h"
#include "tokenizer/token_map.h"
#include "tokenizer/pair_merge.h"
#include "tokenizer/utf8.h"

namespace nibble {
namespace {

constexpr int32_t kBos = 1, kEos = 2, kFirstByteToken = 3;  // llama2.c's fixed layout
constexpr int32_t kMaxTokenLength = 1 << 16;
constexpr int32_t kMaxVocab = 1 << 24;

std::string byte_piece_name(int b) { return fmt::format("<0x{:02X}>", b); }

class Llama2cTokenizer final : public Tokenizer {
 public:
  Llama2cTokenizer(const std::filesystem::path& path, int32_t vocab_size) : file_(path.string()) {
    parse(read_file(path), vocab_size);
    for (int32_t id = 0; id < int32_t(pieces_.size()); ++id) ids_.emplace(pieces_[id], id);  // first id wins
    auto space = ids_.find(" ");
    dummy_prefix_ = space == ids_.end() ? -1 : space->second;
    has_byte_tokens_ = pieces_.size() >= size_t(kFirstByteToken + 256);
    for (int b = 0; b < 256 && has_byte_tokens_; ++b)
      has_byte_tokens_ = pieces_[kFirstByteToken + b] == byte_piece_name(b);
    for (size_t id = 0; id < pieces_.size(); ++id) texts_.push_back(text_of(int32_t(id)));
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    tok::check_utf8(text, "tokenizer input text");
    std::vector<int32_t> ids;
    if (text.empty()) return ids;
    if (dummy_prefix_ < 0)
      throw Error(fmt::format("{}: has no \" \" token for the dummy prefix", file_));
    ids.push_back(dummy_prefix_);
    for (size_t i = 0; i < text.size();) {
      const std::string_view ch = text.substr(i, tok::utf8_step(text, i).len);
      i += ch.size();
      if (auto it = ids_.find(ch); it != ids_.end()) {
        ids.push_back(it->second);
        continue;
      }
      if (!has_byte_tokens_)
        throw Error(fmt::format("{}: no token for a character of the text and no byte tokens "
                                "<0x00>..<0xFF> at ids 3..258 to fall back on", file_));
      for (unsigned char c : ch) ids.push_back(kFirstByteToken + c);
    }
    // llama2.c merges the pair whose concatenation has the highest score (never below -1e10)
    tok::merge_pairs(ids, [&](int32_t a, int32_t b) -> std::optional<tok::PairMerge> {
      auto it = ids_.find(pieces_[a] + pieces_[b]);
      if (it == ids_.end() || !(scores_[it->second] > -1e10f)) return std::nullopt;
      return tok::PairMerge{-double(scores_[it->second]), it->second};
    });
    return ids;
  }

  // As SentencePiece (and llama2.c after BOS) do, the first piece loses its leading space.
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string bytes;
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string& t = token_ref(ids[i]);
      const bool at_start = i == 0 || ids[i - 1] == kBos;
      bytes.append(at_start && !t.empty() && t[0] == ' ' ? t.substr(1) : t);
    }
    return tok::utf8_lossy(bytes);
  }

  std::string token_text(int32_t id) const override { return token_ref(id); }
  int32_t vocab_size() const override { return int32_t(pieces_.size()); }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }

 private:
  std::string read_file(const std::filesystem::path& path) const {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open tokenizer file", file_));
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // Reads the records; vocab_size <= 0 means "as many as the file holds".
  void parse(const std::string& data, int32_t vocab_size) {
    size_t off = 0;
    auto take = [&](void* dst, size_t n, const char* what, size_t token) {
      if (data.size() - off < n)
        throw Error(fmt::format("{}: truncated at byte {} reading the {} of token {}", file_, off,
                                what, token));
      std::memcpy(dst, data.data() + off, n);
      off += n;
    };
    int32_t max_len = 0;
    take(&max_len, 4, "header (max_token_length)", 0);
    if (max_len <= 0 || max_len > kMaxTokenLength)
      throw Error(fmt::format("{}: max_token_length {} is not in [1, {}]", file_, max_len,
                              kMaxTokenLength));
    if (vocab_size > kMaxVocab)
      throw Error(fmt::format("{}: vocab size {} is absurd", file_, vocab_size));
    for (size_t t = 0; vocab_size > 0 ? t < size_t(vocab_size) : off < data.size(); ++t) {
      float score = 0;
      int32_t len = 0;
      take(&score, 4, "score", t);
      take(&len, 4, "length", t);
      if (std::isnan(score)) throw Error(fmt::format("{}: token {} has a NaN score", file_, t));
      if (len < 0 || len > max_len)
        throw Error(fmt::format("{}: token {} has length {}, outside [0, max_token_length {}]",
                                file_, t, len, max_len));
      std::string piece(size_t(len), '\0');
      take(piece.data(), size_t(len), "bytes", t);
      if (piece.find('\0') != std::string::npos)
        throw Error(fmt::format("{}: token {} contains a NUL byte", file_, t));
      scores_.push_back(score);
      pieces_.push_back(std::move(piece));
    }
    if (pieces_.size() <= size_t(kEos))
      throw Error(fmt::format("{}: only {} tokens; llama2.c needs <unk>, <s>, </s> at 0..2", file_,
                              pieces_.size()));
  }

  // What the token adds to decoded text: <0xXX> pieces are their byte, BOS/EOS nothing.
  std::string text_of(int32_t id) const {
    if (id == kBos || id == kEos) return "";
    const std::string& p = pieces_[id];
    if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>' && std::isxdigit(static_cast<unsigned char>(p[3])) &&
        std::isxdigit(static_cast<unsigned char>(p[4])))
      return std::string(1, char(std::stoi(p.substr(3, 2), nullptr, 16)));
    return p;
  }

  const std::string& token_ref(int32_t id) const {
    if (id < 0 || id >= vocab_size())
      throw Error(fmt::format("{}: token id {} is outside the vocab of {}", file_, id, vocab_size()));
    return texts_[id];
  }

  std::string file_;
  std::vector<std::string> pieces_, texts_;
  std::vector<float> scores_;
  tok::TokenMap ids_;
  int32_t dummy_prefix_ = -1;
  bool has_byte_tokens_ = false;
};

}  // namespace

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::filesystem::path& bin_file,
                                                  int32_t vocab_size) {
  return std::make_unique<Llama2cTokenizer>(bin_file, vocab_size);
}

}  // namespace nibble
