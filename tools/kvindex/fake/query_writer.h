// The `--emit-queries` file: query lines of docs/cli.md "Query files" ({"id", "query": {model,
// token_ids, group?}, "after"?, "expect"}), numbered q0, q1, ... in the order they are written,
// each with the answer publish-fake's own model expects.
//
// Thread safety: none (one thread).
#ifndef KVINDEX_TOOLS_FAKE_QUERY_WRITER_H_
#define KVINDEX_TOOLS_FAKE_QUERY_WRITER_H_

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/core/event.h"
#include "kvindex/core/status.h"

namespace kvindex::cli {

class QueryWriter {
 public:
  // Creates (truncates) `path`. kIoError "PATH: cannot create" when it cannot.
  Status Open(const std::string& path);
  // Appends one query; `after` is the (source name, seq) it is answered at (nullopt: at the end);
  // `group` is the KV-cache group it names (nullopt: none, i.e. group 0).
  void Write(const std::string& model, const std::vector<TokenId>& tokens,
             const std::optional<std::pair<std::string, uint64_t>>& after,
             const nlohmann::json& expect, std::optional<uint32_t> group = std::nullopt);
  // Flushes the file. kIoError "PATH: write failed" when any write failed.
  Status Finish();

 private:
  std::string path_;
  std::ofstream out_;
  uint64_t next_id_ = 0;
};

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_QUERY_WRITER_H_
