// SentencePiece tokenizer.model through libsentencepiece (Llama-2 and friends).
#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include "nibble/error.h"
#include "nibble/tokenizer.h"
#include "tokenizer/utf8.h"

namespace nibble {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::filesystem::path& file) : file_(file.string()) {
    if (!std::filesystem::is_regular_file(file))
      throw Error(fmt::format("{}: no such SentencePiece model file", file_));
    const auto status = sp_.Load(file_);
    if (!status.ok())
      throw Error(fmt::format("{}: cannot load SentencePiece model: {}", file_, status.ToString()));
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    tok::check_utf8(text, "tokenizer input text");
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    if (!status.ok())
      throw Error(fmt::format("{}: SentencePiece encode failed: {}", file_, status.ToString()));
    return {ids.begin(), ids.end()};
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    for (int32_t id : ids) check_id(id);
    std::string text;
    const auto status = sp_.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    if (!status.ok())
      throw Error(fmt::format("{}: SentencePiece decode failed: {}", file_, status.ToString()));
    return text;
  }

  // The piece with U+2581 as a space, a byte piece as its byte, control pieces as nothing, the
  // unknown piece as SentencePiece's " \u2047 ". The dummy-prefix space of the first token is
  // the caller's to drop (decode() does it).
  std::string token_text(int32_t id) const override {
    check_id(id);
    if (sp_.IsControl(id)) return "";
    if (sp_.IsUnknown(id)) return " \xE2\x81\x87 ";
    const std::string& piece = sp_.IdToPiece(id);
    if (sp_.IsByte(id)) return std::string(1, char(std::stoi(piece.substr(3, 2), nullptr, 16)));
    std::string out;
    for (size_t i = 0; i < piece.size(); ++i) {
      if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
        out.push_back(' ');
        i += 2;
      } else {
        out.push_back(piece[i]);
      }
    }
    return out;
  }

  int32_t vocab_size() const override { return sp_.GetPieceSize(); }
  int32_t bos_id() const override { return sp_.bos_id(); }
  int32_t eos_id() const override { return sp_.eos_id(); }

 private:
  void check_id(int32_t id) const {
    if (id < 0 || id >= sp_.GetPieceSize())
      throw Error(fmt::format("{}: token id {} is outside the vocab of {}", file_, id,
                              sp_.GetPieceSize()));
  }

  std::string file_;
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::filesystem::path& model_file) {
  return std::make_unique<SentencePieceTokenizer>(model_file);
}

}  // namespace nibble
