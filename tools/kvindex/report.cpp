#include "report.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

namespace kvindex::cli {
namespace {

bool LooksNumeric(const std::string& cell) {
  if (cell.empty()) return false;
  if (cell == "inf") return true;
  return std::all_of(cell.begin(), cell.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == ',' || c == '.' || c == '%' || c == '-';
  });
}

}  // namespace

std::string TextTable::Render() const {
  std::vector<size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  std::string out;
  auto emit = [&](const std::vector<std::string>& row, bool is_header) {
    std::string line;
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : std::string();
      const std::string pad(width[i] - cell.size(), ' ');
      if (i > 0) line += "  ";
      if (!is_header && LooksNumeric(cell)) {
        line += pad + cell;
      } else {
        line += cell + pad;
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header_, true);
  for (const auto& row : rows_) emit(row, false);
  return out;
}

std::string FormatCount(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string FormatPercent(double ratio) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", ratio * 100.0);
  return buf;
}

std::string DumpJson(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return Status::Ok();
  }
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return Status::IoError(path + ": cannot write: " + std::strerror(errno));
  }
  errno = 0;
  const size_t written = std::fwrite(text.data(), 1, text.size(), file);
  int err = written != text.size() ? errno : 0;
  if (std::fclose(file) != 0 && err == 0) err = errno != 0 ? errno : EIO;
  if (written != text.size() || err != 0) {
    return Status::IoError(path + ": write failed" +
                           (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
  }
  return Status::Ok();
}

Status WriteJson(const std::string& path, const nlohmann::json& value) {
  return WriteTextFile(path, DumpJson(value, 2) + "\n");
}

Status FlushStdout() {
  std::cout.flush();
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || std::cout.fail();
  if (!failed) return Status::Ok();
  const int err = errno;  // 0 when the failed write was an earlier one
  return Status::IoError(err != 0 ? std::string("stdout: write failed: ") + std::strerror(err)
                                  : std::string("stdout: write failed"));
}

}  // namespace kvindex::cli
