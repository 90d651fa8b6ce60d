// The byte helpers the HTTP transports share (wire.h).
#include "wire.h"

#include <cstdio>

namespace kvindex::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string TargetPath(std::string_view target) {
  const size_t end = target.find_first_of("?#");
  if (end != std::string_view::npos) target = target.substr(0, end);
  std::string path;
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
  return path;
}

void AppendChunk(std::string& out, std::string_view data) {
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  out.append(size, static_cast<size_t>(n));
  out.append(data);
  out.append("\r\n");
}

}  // namespace kvindex::http
