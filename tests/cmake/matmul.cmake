# Compressed MatMul: the public-API test again with the ISA capped (the
# dispatcher must pick the avx2 row and it must run), and qconv-driver matmul
# runs on every implementation (correctness mode; the driver exits 1 on a
# mismatch) including the dynamic-quantization row with its bound.
add_test(NAME matmul_isa_cap_avx2 COMMAND test_matmul --gtest_filter=MatmulJit.PublicApi)
set_tests_properties(matmul_isa_cap_avx2 PROPERTIES ENVIRONMENT "QCONV_MAX_CPU_ISA=avx2" TIMEOUT 300)

add_test(NAME driver_matmul_all
  COMMAND qconv-driver matmul --impl=all --wei=s4 --group=32 --zp=per_group --bias m1k96n37 m5k96n70 m17k64n13)
set_tests_properties(driver_matmul_all PROPERTIES TIMEOUT 300
  PASS_REGULAR_EXPRESSION "impl=jit:matmul_wc_x4:(avx512_core|avx2) total=1 problems=3 ok=3"
  FAIL_REGULAR_EXPRESSION "status=mismatch|status=failed")

add_test(NAME driver_matmul_avx2_auto
  COMMAND qconv-driver matmul --isa=avx2 --wei=u8 --group=per_oc --zp=tensor m3k160n37)
set_tests_properties(driver_matmul_avx2_auto PROPERTIES TIMEOUT 300
  PASS_REGULAR_EXPRESSION "impl=jit:matmul_wc_x8:avx2 desc=m3k160n37 .*status=ok")

# (The AMX-INT8 row where the CPU has it, else the VNNI one; on a CPU without
# VNNI the opt-in hint has no row and the f32-accurate avx2 row runs: skipped.)
add_test(NAME driver_matmul_dq
  COMMAND qconv-driver matmul --dq --wei=u4 --group=128 --zp=per_oc m32k256n100)
set_tests_properties(driver_matmul_dq PROPERTIES TIMEOUT 300
  PASS_REGULAR_EXPRESSION "impl=jit:matmul_wc_dq:avx512_core_(vnni|amx) desc=m32k256n100 .*status=ok"
  SKIP_REGULAR_EXPRESSION "impl=jit:matmul_wc_x[48]:avx2 desc=m32k256n100 .*status=ok")

# The AVX2 rows' prefill shape as the table picks it under the cap (M = 32 is
# past both ymm crossing points), checked against the reference.
add_test(NAME driver_matmul_avx2_prefill
  COMMAND qconv-driver matmul --isa=avx2 --wei=u4 --group=128 --zp=per_group --bias m32k384n100 m40k640n70)
set_tests_properties(driver_matmul_avx2_prefill PROPERTIES TIMEOUT 300
  PASS_REGULAR_EXPRESSION "impl=jit:matmul_wc_x4:avx2 desc=m40k640n70 .*status=ok"
  FAIL_REGULAR_EXPRESSION "status=mismatch|status=failed|status=unimplemented")
