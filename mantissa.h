// The umbrella header: everything a Mantissa user needs.
//   #include <mantissa.h>
//   namespace mt = mantissa;
#pragma once
#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/autocast_policy.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/random.h"
#include "core/tensor.h"
