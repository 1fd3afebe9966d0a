# CTest cases on the quantized test networks of scripts/make_models.py
# (python3-onnx + python3-numpy, Debian's; nothing downloaded): the script
# writes them into the build folder at test time — QDQ ResNet-50 and
# MobileNet v2 as ONNX Runtime's static quantizer lays them out, the variants
# with per-channel activation quantization, and a small QLinearConv network —
# at 64x64 inputs (the topology is what these check; run.sh runs 224x224), and
# `qconv-driver graph` loads each, runs it as written and after the passes and
# checks that every convolution (and the classifier's Gemm) was lowered onto
# the int8 convolution (lowered=N/N) and that the two runs agree in
# quantization steps of the output (--tol-steps: docs/semantics.md §10 allows
# a value one step off per layer, and a flip carries through the layers;
# measured at 64x64: ResNet-50 3 steps, its per-channel variant 4, MobileNet v2
# 0, its variant 3, the QLinearConv network 0);
# `_reference` runs the QDQ networks on the script's input and compares the
# output with the script's numpy run of the QDQ graph as written (float64
# convolutions: a value on a rounding boundary may land one step off and the
# flips carry through the layers, so the bound is 4 quantization steps; a wrong
# scale, axis or bias is tens of steps).
# The transformer FFNs (int4 MatMulNBits, and the same weights as opset-21
# blocked DequantizeLinear + MatMul; 1024 -> 4096 -> 1024, 7 tokens) run on the
# script's input at the machine's ISA and under the AVX2 cap, checked against
# the script's float64 FFN (tests/cmake/check_ffn_model.sh).
# Without Debian's python3 + onnx + numpy the cases say why and are skipped.
set(QCONV_MODEL_DIR ${CMAKE_CURRENT_BINARY_DIR}/onnx_models)
set(QCONV_MODEL_PYTHON /usr/bin/python3) # Debian's, where python3-onnx installs
add_test(NAME onnx_make_models
  COMMAND sh -c "if ${QCONV_MODEL_PYTHON} -c 'import onnx, numpy' 2>/dev/null; then ${QCONV_MODEL_PYTHON} '${PROJECT_SOURCE_DIR}/scripts/make_models.py' '${QCONV_MODEL_DIR}' --size=64 --reference && ${QCONV_MODEL_PYTHON} '${PROJECT_SOURCE_DIR}/scripts/make_models.py' '${QCONV_MODEL_DIR}' --models=ffn_nbits,ffn_dq21 --reference; else echo 'skipped: ${QCONV_MODEL_PYTHON} cannot import onnx and numpy (Debian packages python3-onnx, python3-numpy; scripts/setup.sh installs them)'; fi")
set_tests_properties(onnx_make_models PROPERTIES TIMEOUT 300 LABELS driver
  FIXTURES_SETUP qconv_onnx_models SKIP_REGULAR_EXPRESSION "skipped:")

# expect_model.cmake: skipped when the model was not made, else expect.cmake.
file(WRITE ${QCONV_DRIVER_TEST_DIR}/expect_model.cmake [=[
if(NOT EXISTS "${MODEL}")
  message("skipped: ${MODEL} was not made (onnx_make_models skipped or failed)")
  return()
endif()
include("${CMAKE_CURRENT_LIST_DIR}/expect.cmake")
]=])

function(qconv_model_test model convs lowered candidates steps)
  set(file ${QCONV_MODEL_DIR}/${model}.onnx)
  add_test(NAME driver_graph_onnx_${model}
    COMMAND ${CMAKE_COMMAND} -DMODEL=${file} -DEXPECT_RC=0
      "-DEXPECT_OUT=op=graph file=[^ ]*${model}.onnx rewritten=0/${convs} lowered=${lowered}/${candidates} .*status=ok"
      "-DFORBID_OUT=status=(mismatch|failed)"
      -P ${QCONV_DRIVER_TEST_DIR}/expect_model.cmake -- $<TARGET_FILE:qconv-driver> graph ${file} --reps=1 --tol-steps=${steps} ${ARGN})
  set_tests_properties(driver_graph_onnx_${model} PROPERTIES TIMEOUT 600 LABELS driver
    FIXTURES_REQUIRED qconv_onnx_models SKIP_REGULAR_EXPRESSION "skipped:")
endfunction()
# model, convolutions read, lowered, lowering candidates (the convolutions and
# the classifier's Gemm), the bound in steps.
qconv_model_test(resnet50_qdq 53 54 54 6)
qconv_model_test(resnet50_qdq_pc 53 54 54 6)
qconv_model_test(resnet50_qdq_zp 53 54 54 6)
qconv_model_test(resnet50_qdq_pt 53 54 54 6)
qconv_model_test(mobilenet_v2_qdq 52 53 53 4)
qconv_model_test(mobilenet_v2_qdq_pc 52 53 53 4)
qconv_model_test(qlinear_conv 3 3 3 1)

# The QDQ networks against the numpy reference of scripts/make_models.py (the
# driver's own before/after check in steps as above).
function(qconv_model_reference_test model)
  set(base ${QCONV_MODEL_DIR}/${model})
  add_test(NAME driver_graph_onnx_${model}_reference
    COMMAND sh -c "if [ ! -f '${base}.expected.npy' ]; then echo 'skipped: ${base}.expected.npy was not made'; exit 0; fi; '$<TARGET_FILE:qconv-driver>' graph '${base}.onnx' --input=input='${base}.input.npy' --output-dir='${base}.out' --reps=1 --tol-steps=6 && ${QCONV_MODEL_PYTHON} '${PROJECT_SOURCE_DIR}/scripts/make_models.py' --compare '${base}' '${base}.out/output.npy' 4 1")
  set_tests_properties(driver_graph_onnx_${model}_reference PROPERTIES TIMEOUT 600 LABELS driver
    FIXTURES_REQUIRED qconv_onnx_models SKIP_REGULAR_EXPRESSION "skipped:")
endfunction()
foreach(m resnet50_qdq resnet50_qdq_pc resnet50_qdq_zp resnet50_qdq_cs mobilenet_v2_qdq mobilenet_v2_qdq_pc)
  qconv_model_reference_test(${m})
endforeach()

# The per-channel zero-point network keeps its glue in integers (docs/graph.md,
# "requantized activation"): no f32 Relu, no f32 MaxPool, no DequantizeLinear of
# a convolution's pre-activation output is left after the passes.
add_test(NAME driver_graph_onnx_resnet50_qdq_zp_int8_glue
  COMMAND ${CMAKE_COMMAND} -DMODEL=${QCONV_MODEL_DIR}/resnet50_qdq_zp.onnx -DEXPECT_RC=0
    "-DEXPECT_OUT=graph=after node=maxpool_2_int8 op=MaxPool impl=.graph:max_pool_nhwc_u8.*lowered=54/54 .*status=ok"
    "-DFORBID_OUT=graph=after node=[^ ]+ op=Relu |graph=after node=[^ ]+ op=MaxPool impl=.graph:max_pool[^_]|graph=after node=conv_[0-9]+_conv_dq |status=(mismatch|failed)"
    -P ${QCONV_DRIVER_TEST_DIR}/expect_model.cmake -- $<TARGET_FILE:qconv-driver> graph ${QCONV_MODEL_DIR}/resnet50_qdq_zp.onnx --reps=1 --tol-steps=6)
set_tests_properties(driver_graph_onnx_resnet50_qdq_zp_int8_glue PROPERTIES TIMEOUT 600 LABELS driver
  FIXTURES_REQUIRED qconv_onnx_models SKIP_REGULAR_EXPRESSION "skipped:")
# Per-channel scales on the same tensors: the convolutions reading them stay in
# f32 (no single source scale), the others are lowered; the output agrees.
qconv_model_test(resnet50_qdq_cs 53 39 54 8)

# The FFNs against their float64 reference: both MatMuls on compressed rows,
# max |difference| ≤ 1e-5 of the largest output (measured 2.5e-7).
foreach(m ffn_nbits ffn_dq21)
  add_test(NAME driver_graph_onnx_${m}
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/cmake/check_ffn_model.sh $<TARGET_FILE:qconv-driver>
      ${QCONV_MODEL_PYTHON} ${PROJECT_SOURCE_DIR}/scripts/make_models.py ${QCONV_MODEL_DIR}/${m} 1e-5 avx2)
  set_tests_properties(driver_graph_onnx_${m} PROPERTIES TIMEOUT 300 LABELS driver
    FIXTURES_REQUIRED qconv_onnx_models SKIP_REGULAR_EXPRESSION "skipped:")
endforeach()

# The README's model job as ./run.sh runs it (no bound given): a quantized
# network is judged in output steps by default (tol=steps:8), exit 0.
add_test(NAME driver_graph_onnx_run_sh_model_job
  COMMAND ${CMAKE_COMMAND} -DMODEL=${QCONV_MODEL_DIR}/resnet50_qdq.onnx -DEXPECT_RC=0
    "-DEXPECT_OUT=op=graph .*lowered=54/54 .*max_steps=[0-9.]+ differ=[0-9.]+ tol=steps:8 status=ok"
    "-DFORBID_OUT=status=(mismatch|failed)"
    -P ${QCONV_DRIVER_TEST_DIR}/expect_model.cmake -- $<TARGET_FILE:qconv-driver> graph ${QCONV_MODEL_DIR}/resnet50_qdq.onnx --reps=1)
set_tests_properties(driver_graph_onnx_run_sh_model_job PROPERTIES TIMEOUT 600 LABELS driver
  FIXTURES_REQUIRED qconv_onnx_models SKIP_REGULAR_EXPRESSION "skipped:")

# scripts/ocr_demo.py without the network: a synthetic page, a probability map
# made from its own ink (the words' dark pixels), the boxes drawn into a PNG
# that reads back with the page's size; at least one region per text line.
add_test(NAME ocr_demo_page_and_boxes
  COMMAND sh -c "if ! ${QCONV_MODEL_PYTHON} -c 'import numpy' 2>/dev/null; then echo 'skipped: ${QCONV_MODEL_PYTHON} cannot import numpy'; exit 0; fi; d='${CMAKE_CURRENT_BINARY_DIR}/ocr_demo' && rm -rf \"$d\" && mkdir -p \"$d\" && s='${PROJECT_SOURCE_DIR}/scripts/ocr_demo.py' && ${QCONV_MODEL_PYTHON} \"$s\" page \"$d/page\" --size=320 --seed=3 && ${QCONV_MODEL_PYTHON} -c \"import numpy as np; x = np.load('$d/page.npy'); np.save('$d/ink.npy', (x[:, :1] < -0.5).astype(np.float32))\" && ${QCONV_MODEL_PYTHON} \"$s\" boxes \"$d/page\" \"$d/ink.npy\" \"$d/boxes.png\" > \"$d/boxes.txt\" && grep -E 'regions=([2-9][0-9]|[1-9][0-9][0-9])' \"$d/boxes.txt\" && ${QCONV_MODEL_PYTHON} -c \"import sys; sys.path.insert(0, '${PROJECT_SOURCE_DIR}/scripts'); import ocr_demo; p = ocr_demo.read_png('$d/boxes.png'); assert p.shape == (320, 320, 3), p.shape; assert ((p[..., 0] == 220) & (p[..., 1] == 20)).sum() > 100\" && ${QCONV_MODEL_PYTHON} \"$s\" iou \"$d/ink.npy\" \"$d/ink.npy\" | grep 'iou=1.0000'")
set_tests_properties(ocr_demo_page_and_boxes PROPERTIES TIMEOUT 120 LABELS driver SKIP_REGULAR_EXPRESSION "skipped:")

# PP-OCR det / cls / rec, float and quantized by ONNX Runtime, against ONNX
# Runtime's saved outputs (scripts/ocr_reference.py check: max_rel for float,
# region IoU / class / argmax agreement for QDQ). The data is made once with
# ONNX Runtime (scripts/ocr_reference.py make DIR) into $QCONV_OCR_REFERENCE
# (default ~/.cache/qconv/ocr_reference); without it the test skips.
add_test(NAME ocr_reference
  COMMAND sh -c "if ! ${QCONV_MODEL_PYTHON} -c 'import numpy' 2>/dev/null; then echo 'skipped: ${QCONV_MODEL_PYTHON} cannot import numpy'; exit 0; fi; ${QCONV_MODEL_PYTHON} ${PROJECT_SOURCE_DIR}/scripts/ocr_reference.py check \"\${QCONV_OCR_REFERENCE:-\$HOME/.cache/qconv/ocr_reference}\" --driver=$<TARGET_FILE:qconv-driver> --threads=1")
set_tests_properties(ocr_reference PROPERTIES TIMEOUT 600 LABELS driver SKIP_REGULAR_EXPRESSION "skipped:")

# bench/exactness.py without the peers: small QDQ convolutions whose u8 x s8
# product pairs overflow 16 bits (the vpmaddubsw path of CPUs without VNNI),
# lowered and run by qconv: within one output step of the integer result.
add_test(NAME exactness_qconv
  COMMAND ${QCONV_MODEL_PYTHON} ${PROJECT_SOURCE_DIR}/bench/exactness.py --driver=$<TARGET_FILE:qconv-driver> --peers=none
    --folder=${CMAKE_CURRENT_BINARY_DIR}/exactness)
set_tests_properties(exactness_qconv PROPERTIES TIMEOUT 120 LABELS driver SKIP_REGULAR_EXPRESSION "skipped:"
  PASS_REGULAR_EXPRESSION "qconv within 1 step of the integer result on every case")
