// Fuzz target for the project's one address parser (core/address.h): ParseNetAddress, behind
// every ZeroMQ endpoint, `--http`, `query --server`, config ip/port and /cache host aliases, and
// ParseListenAddress, behind the server flags. Properties (a violation aborts):
//  - any text gives an address or a kInvalidArgument error, never a crash;
//  - an error is non-empty and, for a text without control characters, one line;
//  - an accepted address has no space or control character in its parts, and its ToString()
//    parses back into the same parts (scheme, host, port, path): what kvindex prints or stores,
//    it reads back the same;
//  - an accepted listen address has a port, no scheme and no path, and every "HOST:PORT" it
//    accepts ParseNetAddress accepts too.
//
// Corpus (tests/fuzz/corpus/address/): the address spellings of core/address.h and docs/cli.md
// (tcp, http, ipc, inproc, IPv6 in brackets, ":port", a port alone, '*' hosts) and bad ones.
#include <string>
#include <string_view>

#include "kvindex/core/address.h"

#include "fuzz_check.h"

namespace {

void Fail(std::string_view what, std::string_view detail, std::string_view input) {
  kvindex::fuzz::Violation("address_fuzz", what, detail, input);
}

void CheckError(const kvindex::Status& status, std::string_view input) {
  if (status.code() != kvindex::StatusCode::kInvalidArgument) {
    Fail("unexpected error code", status.ToString(), input);
  }
  if (status.message().empty() ||
      (kvindex::fuzz::HasNoControl(input) && !kvindex::fuzz::IsOneLine(status.message()))) {
    Fail("error is not one line", status.message(), input);
  }
}

bool SameParts(const kvindex::NetAddress& a, const kvindex::NetAddress& b) {
  return a.scheme == b.scheme && a.host == b.host && a.port == b.port && a.path == b.path;
}

void CheckNetAddress(std::string_view text) {
  auto address = kvindex::ParseNetAddress(text);
  if (!address.ok()) {
    CheckError(address.status(), text);
    return;
  }
  for (const std::string* part : {&address->scheme, &address->host, &address->path}) {
    for (unsigned char c : *part) {
      if (c <= ' ' || c == 0x7f) Fail("a part holds a space or control character", *part, text);
    }
  }
  const std::string written = address->ToString();
  auto back = kvindex::ParseNetAddress(written);
  if (!back.ok())
    Fail("ToString() does not parse back", written + ": " + back.status().message(), text);
  if (!SameParts(*address, *back)) Fail("ToString() parses into other parts", written, text);
}

void CheckListenAddress(std::string_view text) {
  auto listen = kvindex::ParseListenAddress(text, "--http");
  if (!listen.ok()) {
    CheckError(listen.status(), text);
    if (listen.status().message().find("--http") == std::string::npos) {
      Fail("error does not name the flag", listen.status().message(), text);
    }
    return;
  }
  if (!listen->port || !listen->scheme.empty() || !listen->path.empty()) {
    Fail("a listen address with no port, or with a scheme or path", listen->ToString(), text);
  }
  if (listen->host.empty()) Fail("a listen address without a host", listen->ToString(), text);
  auto plain = kvindex::ParseNetAddress(listen->HostPort());
  if (!plain.ok() || plain->host != listen->host || plain->port != listen->port) {
    Fail("HostPort() of a listen address does not parse back", listen->HostPort(), text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckNetAddress(text);
  CheckListenAddress(text);
  return 0;
}
