"""Small hand-written StableHLO programs used by the runtime tests."""

ADD_F32_4 = """module {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"""


def identity(mlir_type):
    return f"""module {{
  func.func public @main(%a: {mlir_type}) -> {mlir_type} {{
    return %a : {mlir_type}
  }}
}}"""


def matmul(m, k, n):
    return f"""module {{
  func.func public @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
    %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
    return %0 : tensor<{m}x{n}xf32>
  }}
}}"""


# The first argument is donated to (aliased with) the output: an in-place add.
ADD_DONATING = """module {
  func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}"""
