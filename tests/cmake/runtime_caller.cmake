# The suites that run regions on several threads again with QCONV_RUNTIME=caller
# (core/parallel.cpp: the calling thread claims tasks with the workers instead
# of OpenMP's regions): the same bytes at 1, 2 and 3 threads, the caller's
# pools (whose regions never reach the built-in one), concurrent callers
# (one region at a time on the workers; a second caller runs its tasks itself).
add_test(NAME runtime_caller_jit_conv
         COMMAND test_jit_conv --gtest_filter=JitConv.ThreadCountDoesNotChangeBytes:JitConv.FewItemsSplitByCost:JitConv.ClipAndLastRoundChains:JitConv.AvxVnniRowsExact)
add_test(NAME runtime_caller_jit_conv_dw
         COMMAND test_jit_conv_dw --gtest_filter=JitConvDw.RowKernelThreadCountDoesNotChangeBytes:JitConvDw.AvxVnniThreadCountDoesNotChangeBytes:JitConvDw.RowKernelShapesZpChainsDst)
add_test(NAME runtime_caller_conv_dw_fusion COMMAND test_conv_dw_fusion)
add_test(NAME runtime_caller_threadpool COMMAND test_threadpool)
add_test(NAME runtime_caller_concurrency COMMAND test_concurrency)
set_tests_properties(runtime_caller_jit_conv runtime_caller_jit_conv_dw runtime_caller_conv_dw_fusion
                     runtime_caller_threadpool runtime_caller_concurrency
                     PROPERTIES ENVIRONMENT "QCONV_RUNTIME=caller" TIMEOUT 600)
