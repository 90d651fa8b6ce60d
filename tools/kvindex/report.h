// Shared output of the subcommands: an aligned text table for stdout and `--json FILE`
// writing (`-` = stdout), so every subcommand prints the same way (docs/cli.md "Conventions").
#ifndef KVINDEX_TOOLS_REPORT_H_
#define KVINDEX_TOOLS_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvindex/core/status.h"

namespace kvindex::cli {

// A text table: a header row, then rows of cells. Numeric-looking cells are right-aligned, others
// left-aligned; columns are separated by two spaces.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // The table, one line per row, header first, each line ending in '\n'.
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// "12,031": an integer with thousands separators.
std::string FormatCount(uint64_t value);
// "36.64%": a ratio in [0, 1] as a percentage with two decimals.
std::string FormatPercent(double ratio);

// `value` as JSON text (`indent` as nlohmann's dump()), never throwing: invalid UTF-8 in a string
// becomes U+FFFD, one per maximal ill-formed subsequence, the project's policy (core/utf8.h;
// tests/json_utf8_replace_test.cpp checks nlohmann's handler against it).
std::string DumpJson(const nlohmann::json& value, int indent = -1);

// Writes `text` to `path` ("-" = stdout, flushed). Fails with kIoError "PATH: cannot write: WHY"
// when the file cannot be created, or "PATH: write failed[: WHY]" when a write or the close fails
// (e.g. a full device); on stdout a failure is left to FlushStdout().
Status WriteTextFile(const std::string& path, const std::string& text);

// Writes `value` (pretty-printed, with a final newline) to `path`, or to stdout when `path` is
// "-". Fails as WriteTextFile().
Status WriteJson(const std::string& path, const nlohmann::json& value);

// Flushes stdout (C stdio and std::cout) and reports whether everything printed reached it:
// kIoError "stdout: write failed[: REASON]" when a write failed, e.g. on a full device, so that a
// command whose results were lost never exits 0.
Status FlushStdout();

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_REPORT_H_
