# CTest cases of `qconv-driver graph` on ONNX models (the fuzz seeds of
# tests/fuzz/corpus/onnx/, small models written by test_onnx): a MatMulNBits
# FFN runs on compressed MatMuls and agrees before/after; a refused op, a
# missing file and a text file named .onnx are bad input (exit status 2).
# The models built at test time and the refusals: tests/test_onnx.cpp.
set(onnx_seeds ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/onnx)
qconv_driver_test(graph_onnx_matmulnbits 0 OUT "matmul_wc.*group16 zp:per_group bias.*op=graph .*status=ok"
  ARGS graph ${onnx_seeds}/ffn_matmulnbits.onnx --reps=1)
qconv_driver_test(graph_onnx_dequantize 0 OUT "matmul_wc.*group16 zp:per_group bias.*op=graph .*status=ok"
  ARGS graph ${onnx_seeds}/ffn_dequantize.onnx --reps=1)
qconv_driver_test(graph_onnx_refused_op_is_bad_input 2 ERR "node 'pool' \\(#0, MaxPool\\): attribute 'kernel_shape': is required"
  ARGS graph ${onnx_seeds}/refused_maxpool.onnx)
qconv_driver_test(graph_onnx_missing_file_is_bad_input 2 ERR "cannot open"
  ARGS graph ${QCONV_DRIVER_TEST_DIR}/no_such_model.onnx)
file(WRITE ${QCONV_DRIVER_TEST_DIR}/text.onnx "x = Parameter f32[1]\ny = Result(x)\n")
qconv_driver_test(graph_onnx_text_file_is_bad_input 2 ERR "model: .*text.onnx"
  ARGS graph ${QCONV_DRIVER_TEST_DIR}/text.onnx)
