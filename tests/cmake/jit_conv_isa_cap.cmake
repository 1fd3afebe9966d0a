# The JIT conv suite again with the ISA capped, so that the dispatcher's
# choice and the avx2 / avx2_vnni / avx512_core kernels are exercised as on
# such CPUs (avx2_vnni: where the CPU has AVX-VNNI; the rows' tests skip
# otherwise).
foreach(cap avx2 avx2_vnni avx512_core)
  add_test(NAME jit_conv_isa_cap_${cap}
           COMMAND test_jit_conv --gtest_filter=JitConv.ExtremeData:JitConv.OddChannelCounts:JitConv.GroupsPaddingDilationStride:JitConv.AutoPicksJitForLegacyZpAndPostOps:JitConv.ThreadCountDoesNotChangeBytes:JitConv.FewItemsSplitByCost:JitConv.ClipAndLastRoundChains:JitConv.DepthwiseShapes:JitConv.NoInt16SaturationOnAnyRow:JitConv.S8SourceTensorZeroPoint:JitConv.S8SourcePerChannelLegacyZpKernelLevel:JitConv.AvxVnniRowsExact)
  set_tests_properties(jit_conv_isa_cap_${cap} PROPERTIES ENVIRONMENT "QCONV_MAX_CPU_ISA=${cap}" TIMEOUT 600)
  add_test(NAME jit_conv_dw_isa_cap_${cap}
           COMMAND test_jit_conv_dw --gtest_filter=JitConvDw.S8SourceTensorZeroPoint:JitConvDw.AvxVnni*)
  set_tests_properties(jit_conv_dw_isa_cap_${cap} PROPERTIES ENVIRONMENT "QCONV_MAX_CPU_ISA=${cap}" TIMEOUT 600)
  # The fused 1x1 + dw rows: under an AVX2 cap auto picks them (AVX-512 caps: the composite).
  add_test(NAME conv_dw_fusion_isa_cap_${cap} COMMAND test_conv_dw_fusion)
  set_tests_properties(conv_dw_fusion_isa_cap_${cap} PROPERTIES ENVIRONMENT "QCONV_MAX_CPU_ISA=${cap}" TIMEOUT 600)
endforeach()
