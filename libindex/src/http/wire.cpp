// The byte helpers the HTTP transports share (wire.h).
#include "wire.h"

#include <charconv>
#include <cstdio>
#include <ostream>  // Beast's status.hpp streams a status without including it

#include <boost/beast/http/status.hpp>

namespace kvindex::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

template <typename Int>
void AppendNumber(std::string& out, Int value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, static_cast<size_t>(end - digits));
}

}  // namespace

void TargetPath(std::string_view target, std::string& path) {
  const size_t end = target.find_first_of("?#");
  if (end != std::string_view::npos) target = target.substr(0, end);
  path.clear();
  path.reserve(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == '%' && i + 2 < target.size()) {
      const int high = HexValue(target[i + 1]);
      const int low = HexValue(target[i + 2]);
      if (high >= 0 && low >= 0) {
        path += static_cast<char>(high * 16 + low);
        i += 2;
        continue;
      }
    }
    path += target[i];
  }
}

std::string TargetPath(std::string_view target) {
  std::string path;
  TargetPath(target, path);
  return path;
}

void AppendChunk(std::string& out, std::string_view data) {
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  out.append(size, static_cast<size_t>(n));
  out.append(data);
  out.append("\r\n");
}

void ResponseHead(unsigned version, int status, std::string_view content_type,
                  size_t content_length, bool keep_alive, std::string& out) {
  const auto reason =
      boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(status));
  out.assign("HTTP/");
  out += static_cast<char>('0' + version / 10 % 10);
  out += '.';
  out += static_cast<char>('0' + version % 10);
  out += ' ';
  AppendNumber(out, status);
  out += ' ';
  out.append(reason.data(), reason.size());
  out.append("\r\nContent-Type: ");
  out.append(content_type);
  out.append("\r\nContent-Length: ");
  AppendNumber(out, content_length);
  if (version >= 11 && !keep_alive) out.append("\r\nConnection: close");
  if (version < 11 && keep_alive) out.append("\r\nConnection: keep-alive");
  out.append("\r\n\r\n");
}

}  // namespace kvindex::http
