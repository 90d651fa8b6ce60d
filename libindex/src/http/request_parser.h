// RequestParser: Beast's HTTP/1.1 request parser (basic_parser) keeping only what the transport
// needs: the method, the target, the version, whether the client sent "Expect: 100-continue",
// and the body, appended to a string the connection keeps from request to request. No field list
// is built, so a request allocates nothing once the connection's strings have grown. The
// keep-alive semantics, the header and body limits and every parse error are the library's.
#ifndef KVINDEX_HTTP_REQUEST_PARSER_H_
#define KVINDEX_HTTP_REQUEST_PARSER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>

namespace kvindex::http {

// The parts of one request the parser keeps; the strings keep their storage between requests.
struct RequestParts {
  boost::beast::http::verb method = boost::beast::http::verb::unknown;
  std::string method_string;
  std::string target;
  unsigned version = 11;
  bool expect_continue = false;
  std::string body;

  void Clear() {
    method = boost::beast::http::verb::unknown;
    method_string.clear();
    target.clear();
    version = 11;
    expect_continue = false;
    body.clear();
  }
};

class RequestParser final : public boost::beast::http::basic_parser<true> {
 public:
  // Parses one request into `parts` (cleared first), which must outlive the parser.
  explicit RequestParser(RequestParts& parts) : parts_(parts) { parts_.Clear(); }

 private:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;
  using field = boost::beast::http::field;

  void on_request_impl(boost::beast::http::verb method, string_view method_str, string_view target,
                       int version, error_code&) override {
    parts_.method = method;
    parts_.method_string.assign(method_str.data(), method_str.size());
    parts_.target.assign(target.data(), target.size());
    parts_.version = static_cast<unsigned>(version);
  }
  void on_response_impl(int, string_view, int, error_code&) override {}
  void on_field_impl(field name, string_view, string_view value, error_code&) override {
    // The first Expect field counts, as a field lookup would find it.
    if (name == field::expect && !seen_expect_) {
      seen_expect_ = true;
      parts_.expect_continue = boost::beast::iequals(value, "100-continue");
    }
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         error_code&) override {
    // The length is at most the body limit here (the library checks it first).
    if (content_length) parts_.body.reserve(static_cast<size_t>(*content_length));
  }
  std::size_t on_body_impl(string_view body, error_code&) override {
    parts_.body.append(body.data(), body.size());
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code&) override {
    parts_.body.append(body.data(), body.size());
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  RequestParts& parts_;
  bool seen_expect_ = false;
};

}  // namespace kvindex::http

#endif  // KVINDEX_HTTP_REQUEST_PARSER_H_
