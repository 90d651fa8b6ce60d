#include "kvindex/core/address.h"

#include <string>

namespace kvindex {
namespace {

Status Bad(std::string_view text, std::string_view why) {
  return Status::InvalidArgument("address '" + std::string(text) + "': " + std::string(why));
}

bool ParsePort(std::string_view digits, uint16_t& out) {
  if (digits.empty() || digits.size() > 5) return false;
  uint32_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535) return false;
  out = static_cast<uint16_t>(value);
  return true;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

}  // namespace

std::string NetAddress::HostPort() const {
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port) out += ":" + std::to_string(*port);
  return out;
}

std::string NetAddress::ToString() const {
  // Without a scheme or a port, an all-digit host would read back as a port alone ("[0]" is host
  // 0, "0" is port 0): keep its brackets.
  if (scheme.empty() && !port && AllDigits(host)) return "[" + host + "]" + path;
  std::string out = scheme.empty() ? std::string() : scheme + "://";
  return out + HostPort() + path;
}

Result<NetAddress> ParseNetAddress(std::string_view text) {
  if (text.empty()) return Bad(text, "empty");
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return Bad(text, "contains a space or control character");
    }
  }
  NetAddress out;
  std::string_view rest = text;
  if (const size_t scheme = rest.find("://"); scheme != std::string_view::npos) {
    out.scheme = std::string(rest.substr(0, scheme));
    if (out.scheme.empty()) return Bad(text, "empty scheme before '://'");
    rest = rest.substr(scheme + 3);
    if (out.scheme == "ipc" || out.scheme == "inproc") {  // ZeroMQ: the rest is a path or name
      out.path = std::string(rest);
      return out;
    }
  } else if (AllDigits(rest)) {  // "5557": a port alone
    uint16_t port = 0;
    if (!ParsePort(rest, port)) return Bad(text, "port out of range 0-65535");
    out.port = port;
    return out;
  }
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    out.path = std::string(rest.substr(slash));
    rest = rest.substr(0, slash);
  }
  std::string_view port_text;
  bool has_port = false;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return Bad(text, "'[' without ']'");
    out.host = std::string(rest.substr(1, close - 1));
    if (out.host.empty()) return Bad(text, "empty host in '[]'");
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Bad(text, "expected ':' after ']'");
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = rest.rfind(':');
    if (colon != std::string_view::npos && rest.substr(0, colon).find(':') != std::string_view::npos) {
      return Bad(text, "an IPv6 host needs brackets: [host]:port");
    }
    out.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = rest.substr(colon + 1);
      has_port = true;
    }
  }
  if (out.host.find_first_of("[]") != std::string::npos) return Bad(text, "misplaced bracket");
  if (has_port) {
    uint16_t port = 0;
    if (port_text.empty()) return Bad(text, "empty port after ':'");
    if (!ParsePort(port_text, port)) return Bad(text, "port is not a number in 0-65535");
    out.port = port;
  }
  if (out.host.empty() && !out.port && out.path.empty()) return Bad(text, "no host or port");
  return out;
}

Result<NetAddress> ParseListenAddress(std::string_view text, std::string_view flag,
                                      std::string_view default_host) {
  auto parsed = ParseNetAddress(text);
  const std::string prefix = std::string(flag) + " '" + std::string(text) + "': ";
  if (!parsed.ok()) {
    return Status::InvalidArgument(prefix + "expected HOST:PORT (" + parsed.status().message() + ")");
  }
  NetAddress a = std::move(*parsed);
  if (!a.scheme.empty() || !a.path.empty()) {
    return Status::InvalidArgument(prefix + "expected HOST:PORT, without a scheme or path");
  }
  if (!a.port) return Status::InvalidArgument(prefix + "expected HOST:PORT (no port)");
  if (a.host.empty()) {
    a.host = text.find(':') != std::string_view::npos ? "0.0.0.0" : std::string(default_host);
  }
  return a;
}

}  // namespace kvindex
