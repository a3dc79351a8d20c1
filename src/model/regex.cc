#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/regex.h"

#include <pcre2.h>

namespace larql {

Result<std::shared_ptr<Regex>> Regex::compile(const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return make_error(ErrorCode::invalid_argument, "regex '" + pattern + "' does not compile at offset " +
                                                       std::to_string(offset) + ": " + reinterpret_cast<char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional speed-up; matching works without it
  auto re = std::shared_ptr<Regex>(new Regex());
  re->code_ = code;
  return re;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view subject) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  size_t start = 0;
  // The first match checks the subject's UTF-8 (a bad subject yields no matches); the
  // others skip the check, which PCRE2 makes from the start offset to the subject's end:
  // once per match, that made splitting text into its words quadratic (a 640 KB prompt
  // took 37 s to tokenize). Every later start is a character's first byte, as the
  // unchecked mode requires.
  uint32_t options = 0;
  while (start <= subject.size()) {
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start, options, md, nullptr);
    options = PCRE2_NO_UTF_CHECK;
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[1] == ov[0]) {  // empty match: step over one character
      if (ov[0] >= subject.size()) break;
      size_t next = ov[0] + 1;
      while (next < subject.size() && (static_cast<unsigned char>(subject[next]) & 0xC0) == 0x80) ++next;
      start = next;
      continue;
    }
    out.emplace_back(ov[0], ov[1]);
    start = ov[1];
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace larql
