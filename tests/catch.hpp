// One include for Catch2 v2 and v3, so the tests build on Debian 12 and Ubuntu 24.04 alike.
#pragma once
#if TPGRAPH_CATCH_VERSION == 3
#include <catch2/catch_approx.hpp>
#include <catch2/catch_session.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
