// NetAddress: a network address as flags and configuration files spell it, and the one parser
// every part of kvindex uses for it (ZeroMQ endpoints, `--http`, `query --server`, instance hosts).
//
//   [scheme://]host[:port][/path]     tcp://127.0.0.1:5557, http://[::1]:13333/, *:5557
//   [scheme://][v6-host]:port         IPv6 hosts in brackets
//   :port                             no host
//   port                              digits only: a port and no host
//   ipc:///tmp/kv.sock                a scheme whose rest is a path (no host, no port)
//
// Parsing checks the shape only (a port is 0-65535 in decimal digits, brackets balance, no space);
// what a caller requires (a scheme, a host, a port) it checks on the result. Plain functions of
// their arguments: any thread.
#ifndef KVINDEX_CORE_ADDRESS_H_
#define KVINDEX_CORE_ADDRESS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvindex/core/status.h"

namespace kvindex {

struct NetAddress {
  std::string scheme;            // "tcp", "http", "ipc", ...; empty when the text has none
  std::string host;              // without IPv6 brackets; empty when absent
  std::optional<uint16_t> port;  // absent when the text has none
  std::string path;              // from the first '/' after the host (or the whole rest of ipc://)

  // The address written back: scheme://host:port/path, IPv6 hosts in brackets.
  std::string ToString() const;
  // host:port (IPv6 in brackets), without scheme or path.
  std::string HostPort() const;
};

// Parses `text` as described above. kInvalidArgument, naming the problem, on a bad shape: an empty
// text, an empty port after ':', a port that is not 0-65535, an unclosed '[', a space or control
// character.
Result<NetAddress> ParseNetAddress(std::string_view text);

// The listening address of a server flag ("HOST:PORT", ":PORT" for every interface, or "PORT"
// for `default_host`): a port is required and no scheme or path is allowed. The message names
// `flag`.
Result<NetAddress> ParseListenAddress(std::string_view text, std::string_view flag,
                                      std::string_view default_host = "127.0.0.1");

}  // namespace kvindex

#endif  // KVINDEX_CORE_ADDRESS_H_
