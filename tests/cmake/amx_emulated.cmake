# The AMX rows' exactness suites again under the tile emulator
# (QCONV_TEST_AMX=emulate; tests/support/amx_emulator.h), on every machine: on
# a CPU without AMX the discovered tests already run emulated, on an AMX Xeon
# these cases run the same generated code through the emulator as well, and
# the conv row's tile utilisation over ResNet-50 is printed from the
# emulator's counters. On a CPU without AMX the two cases skip at start-up
# (QCONV_TEST_AMX_AGAIN=1, exit code 77): there the discovered cases were
# already this run, and repeating them cost 46 s of the Release suite and
# 164 s of the sanitizer suite (docs/testing.md).
add_test(NAME jit_conv_amx_emulated
         COMMAND test_jit_conv_amx --gtest_filter=AmxConv.*:Cases/AmxSmall.*)
set_tests_properties(jit_conv_amx_emulated PROPERTIES ENVIRONMENT "QCONV_TEST_AMX=emulate;QCONV_TEST_AMX_AGAIN=1" SKIP_RETURN_CODE 77 TIMEOUT 600)
# The AMX MatMul rows likewise (the BF16 rows' accuracy and table tests and
# their per-OC and group-128 cases of every weight type; the dynamic-quantization
# row's extremes, table and group-128 cases).
add_test(NAME matmul_amx_emulated
         COMMAND test_matmul_amx --gtest_filter=MatmulAmxAccuracy.*:MatmulAmxRows.*:Rows/MatmulAmx.MatchesReference/*_oc_*:Rows/MatmulAmx.MatchesReference/*_g128_*:MatmulAmxDq.*:Rows/MatmulAmxDq.MatchesReference/*_g128_*)
set_tests_properties(matmul_amx_emulated PROPERTIES ENVIRONMENT "QCONV_TEST_AMX=emulate;QCONV_TEST_AMX_AGAIN=1" SKIP_RETURN_CODE 77 TIMEOUT 600)
