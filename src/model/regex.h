// A compiled PCRE2 pattern (UTF, Unicode properties, JIT) for tokenizer pre-tokenisation.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/errors.h"

namespace larql {

class Regex {
 public:
  static Result<std::shared_ptr<Regex>> compile(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches, left to right, as byte ranges [begin, end).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view subject) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace larql
