// tensordesc.hpp alone, nothing else: capi/lib/tests/c_abi/c_api.rs compiles it as C++11 and C++14, where
// the header must stop with its one #error, and as C++17 and C++20, where it compiles.
#include "tensordesc.hpp"
