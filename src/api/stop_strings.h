// OpenAI's `stop`: generation ends where the decoded text first contains one of the
// strings, which is not emitted. Text is checked as it streams, so a stop string split
// across tokens is still found: whatever could be the start of one is held back until the
// next piece decides.
#pragma once

#include <string>
#include <vector>

namespace larql {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);
  // Takes the next piece of text; returns what can now be emitted. stopped() turns true
  // when a stop string was found (the text before it is emitted, it and the rest are not).
  std::string push(const std::string& piece);
  // At the end of generation: whatever was held back (no stop string came).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace larql
