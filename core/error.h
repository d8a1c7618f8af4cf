// mantissa::Error and the MT_CHECK macro: every user mistake becomes an
// exception that names the op, the shapes and the dtypes involved.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace mantissa {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace mantissa

// MT_CHECK(cond, "op", "message parts", ...): throws mantissa::Error("op: message").
#define MT_CHECK(cond, op, ...)                                                              \
  do {                                                                                       \
    if (!(cond)) throw ::mantissa::Error(::mantissa::detail::concat(op, ": ", __VA_ARGS__)); \
  } while (0)

#define MT_FAIL(op, ...) throw ::mantissa::Error(::mantissa::detail::concat(op, ": ", __VA_ARGS__))
