#include "fake/query_writer.h"

#include "report.h"

namespace kvindex::cli {

Status QueryWriter::Open(const std::string& path) {
  path_ = path;
  out_.open(path, std::ios::trunc);
  if (!out_) return Status::IoError(path + ": cannot create");
  return Status::Ok();
}

void QueryWriter::Write(const std::string& model, const std::vector<TokenId>& tokens,
                        const std::optional<std::pair<std::string, uint64_t>>& after,
                        const nlohmann::json& expect, std::optional<uint32_t> group) {
  nlohmann::json q;
  q["id"] = "q" + std::to_string(next_id_++);
  q["query"] = {{"model", model}, {"token_ids", tokens}};
  if (group) q["query"]["group"] = *group;
  if (after) q["after"] = {{"source", after->first}, {"seq", after->second}};
  q["expect"] = expect;
  out_ << DumpJson(q) << "\n";
}

Status QueryWriter::Finish() {
  out_.flush();
  if (!out_) return Status::IoError(path_ + ": write failed");
  return Status::Ok();
}

}  // namespace kvindex::cli
