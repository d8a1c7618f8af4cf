// Constants that depend on the batch size, for exports with a dynamic batch dim. A constant is a
// tensor no traced kernel computed from the inputs (docs/onnx.md), so a fill shaped after an
// input — mt::zeros({x.size(0), n}), an initial hidden state — is traced with the example's
// batch baked into its shape. Tracing a second time with one more row shows which constants
// those are. Internal to mantissa::onnx.
#pragma once
#include <cstdint>
#include <string>

#include "onnx/graph.h"

namespace mantissa::onnx {

// `at_batch` was traced with inputs of `batch` rows, `at_batch_plus_one` with one row more. Every
// constant of `at_batch` that differs between the two becomes, if it is one value broadcast over
// a shape whose only changing dim is the batch, an Expand of that value to the shape read from
// `batch_input` at run time; any other difference (a different graph, an arange(x.size(0)), a
// shape the tracer could not mark as the batch) throws mantissa::Error naming the constant and
// the node that reads it.
void make_batch_constants_symbolic(Graph& at_batch, const Graph& at_batch_plus_one, int64_t batch,
                                   const std::string& batch_input);

}  // namespace mantissa::onnx
