#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <memory>

#include "nibble/error.h"
#include "tokenizer/utf8.h"

namespace nibble::tok {
namespace {

struct MatchDataFree {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// One ovector pair is all we read; PCRE2 fills the whole-match offsets even when the pattern has
// groups (pcre2_match then returns 0). One per thread keeps matching thread-safe.
pcre2_match_data* thread_match_data() {
  thread_local std::unique_ptr<pcre2_match_data, MatchDataFree> md(
      pcre2_match_data_create(1, nullptr));
  return md.get();
}

pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

}  // namespace

Regex::Regex(std::string_view pattern, bool literal, std::string_view what) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(fmt::format("{}: bad regex at offset {}: {}", what, err_off,
                            reinterpret_cast<const char*>(msg)));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is absent
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(as_code(code_)); }

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  pcre2_match_data* md = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(as_code(code_), subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md,
                               nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(fmt::format("tokenizer regex match failed: {}", reinterpret_cast<char*>(msg)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    out.push_back({ov[0], ov[1]});
    if (ov[1] > ov[0]) {
      pos = ov[1];
    } else {  // empty match: step over one character
      if (ov[1] >= text.size()) return;
      pos = ov[1] + utf8_step(text, ov[1]).len;
    }
  }
}

bool Regex::matches_prefix(std::string_view text) const {
  const int rc = pcre2_match(as_code(code_), reinterpret_cast<PCRE2_SPTR>(text.data()),
                             text.size(), 0, PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED,
                             thread_match_data(), nullptr);
  return rc >= 0;
}

}  // namespace nibble::tok
