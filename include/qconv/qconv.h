// qconv: quantized convolution and weight-compressed MatMul for x86-64.
#pragma once
#include "qconv/conv.h"
#include "qconv/conv_desc.h"
#include "qconv/conv_f32.h"
#include "qconv/matmul.h"
#include "qconv/post_ops.h"
#include "qconv/threadpool.h"
#include "qconv/types.h"
