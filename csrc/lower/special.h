// Helpers of special.cpp that other families call (special_functions.cpp, elementwise.cpp).
#pragma once
#include "lower/helpers.h"

namespace tpu::lower {
Value special_lgamma(Builder& b, Value x);                        // lgamma(x), in x's float type
Value special_bessel_i(Builder& b, Value x, int nu, bool scaled);  // I_nu(x), nu = 0 or 1; exp(-|x|) I_nu(x) if scaled
Value special_ndtri(Builder& b, Value p);                         // the inverse of the normal CDF
}  // namespace tpu::lower
