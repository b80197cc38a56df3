#pragma once
// One exception type for every user-facing failure: bad graphs, bad files,
// impossible options. Messages name the node, field or option at fault.
#include <stdexcept>
#include <string>

namespace tsopt {

class error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace tsopt
