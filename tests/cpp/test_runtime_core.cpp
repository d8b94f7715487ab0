// Torch-free runtime pieces that need no plugin: hashing, signature parsing, compile options.
#include <string>

#include "check.h"
#include "pjrt/client.h"
#include "runtime/sha256.h"
#include "runtime/signature.h"

using namespace tpu;

int main() {
  // FIPS 180-4 test vectors, including the two-block padding case.
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

  auto params = main_parameters(
      "func.func public @main(%arg0: tensor<2x3xf32> {tf.aliasing_output = 0 : i32}, "
      "%arg1: tensor<complex<f64>>, %arg2: tensor<8xi1>, %arg3: tensor<4x8xf8E4M3FN>) -> tensor<2x3xf32> {");
  CHECK(params && params->size() == 4);
  if (params && params->size() == 4) {
    CHECK(((*params)[0] == hlo::TensorType{DType::F32, {2, 3}}));
    CHECK(((*params)[1] == hlo::TensorType{DType::C128, {}}));
    CHECK(((*params)[2] == hlo::TensorType{DType::Pred, {8}}));
    CHECK(((*params)[3] == hlo::TensorType{DType::F8E4M3FN, {4, 8}}));
  }
  CHECK(!main_parameters("func.func @f(%a: tensor<4xf32>)"));
  // the largest tensor of a program decides its XLA CPU optimization level (a 0-d tensor has one element)
  CHECK(largest_tensor("%0 = stablehlo.add %a, %b : tensor<16x16xf32>\n return %0 : tensor<4xcomplex<f32>>") == 256);
  CHECK(largest_tensor("func.func @main(%a: tensor<f64>) -> tensor<f64>") == 1);
  CHECK(largest_tensor("tensor<2x3x1000xi1> tensor<0xf32>") == 6000);
  CHECK_THROWS(pjrt::Error, check_arguments({{DType::F32, {4}}}, {{DType::S32, {4}}}),
               "argument 0: program expects tensor<4xf32>, got tensor<4xi32>");
  CHECK_THROWS(pjrt::Error, check_arguments({{DType::F32, {4}}}, {}), "takes 1 arguments, got 0");

  // executable_build_options { num_replicas: 1 num_partitions: 1 } compile_portable_executable: true
  CHECK(pjrt::Client::default_compile_options() == std::string("\x1a\x04\x20\x01\x28\x01\x20\x01", 8));
  return test::failures();
}
