#include "kvindex/core/address.h"

#include <doctest/doctest.h>

namespace kvindex {
namespace {

NetAddress Parse(std::string_view text) {
  auto a = ParseNetAddress(text);
  REQUIRE_MESSAGE(a.ok(), a.status().ToString());
  return *a;
}

TEST_SUITE("address") {

TEST_CASE("A ZeroMQ tcp endpoint splits into scheme, host and port") {
  const NetAddress a = Parse("tcp://127.0.0.1:5557");
  CHECK(a.scheme == "tcp");
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == uint16_t{5557});
  CHECK(a.path.empty());
  CHECK(a.ToString() == "tcp://127.0.0.1:5557");
  CHECK(a.HostPort() == "127.0.0.1:5557");
}

TEST_CASE("A wildcard bind host and an ipc path are kept as written") {
  CHECK(Parse("tcp://*:5557").host == "*");
  const NetAddress ipc = Parse("ipc:///tmp/kv.sock");
  CHECK(ipc.scheme == "ipc");
  CHECK(ipc.host.empty());
  CHECK(!ipc.port);
  CHECK(ipc.path == "/tmp/kv.sock");
  CHECK(ipc.ToString() == "ipc:///tmp/kv.sock");
}

TEST_CASE("IPv6 hosts are written in brackets and read without them") {
  const NetAddress a = Parse("http://[::1]:13333/");
  CHECK(a.host == "::1");
  CHECK(a.port == uint16_t{13333});
  CHECK(a.path == "/");
  CHECK(a.ToString() == "http://[::1]:13333/");
  CHECK(!ParseNetAddress("::1:80").ok());
  CHECK(!ParseNetAddress("[::1:80").ok());
  CHECK(!ParseNetAddress("[]:80").ok());
  CHECK(!ParseNetAddress("[::1]80").ok());
}

TEST_CASE("An all-digit host in brackets reads back as a host, not as a port") {
  const NetAddress a = Parse("[0]");
  CHECK(a.host == "0");
  CHECK(!a.port);
  CHECK(a.ToString() == "[0]");
  CHECK(Parse(a.ToString()).host == "0");
  CHECK(Parse("tcp://[12]:80").ToString() == "tcp://12:80");
}

TEST_CASE("A port alone, a host alone and a path are each accepted") {
  const NetAddress port = Parse("8080");
  CHECK(port.host.empty());
  CHECK(port.port == uint16_t{8080});
  const NetAddress host = Parse("example.org");
  CHECK(host.host == "example.org");
  CHECK(!host.port);
  const NetAddress url = Parse("http://h:1/a/b?c");
  CHECK(url.path == "/a/b?c");
  CHECK(Parse(":0").port == uint16_t{0});
}

TEST_CASE("Bad ports, empty parts and spaces are errors naming the address") {
  for (const char* bad : {"", "host:", "host:99999", "host:http", "host:-1", "://h:1", "h :1",
                          "tcp://", "a\tb:1", "h:65536"}) {
    auto a = ParseNetAddress(bad);
    CHECK_MESSAGE(!a.ok(), bad);
    if (!a.ok()) CHECK(a.status().message().find("address '") == 0);
  }
  CHECK(Parse("h:65535").port == uint16_t{65535});
}

TEST_CASE("A listening address defaults its host and refuses a scheme") {
  auto a = ParseListenAddress("127.0.0.1:13333", "--http");
  REQUIRE(a.ok());
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == uint16_t{13333});
  CHECK(ParseListenAddress(":80", "--http")->host == "0.0.0.0");
  CHECK(ParseListenAddress("8080", "--http")->host == "127.0.0.1");
  CHECK(ParseListenAddress("[::1]:8080", "--http")->host == "::1");
  for (const char* bad : {"host:", "host:99999", "host:http", "host", "http://h:1", "h:1/x"}) {
    auto r = ParseListenAddress(bad, "--http");
    CHECK_MESSAGE(!r.ok(), bad);
    if (!r.ok()) CHECK(r.status().message().find("--http '") == 0);
  }
}

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
