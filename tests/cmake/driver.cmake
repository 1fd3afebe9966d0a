# CTest cases that run qconv-driver and check its exit status and output:
# the implementation list, a small batch in correctness mode on every
# implementation (several data types, zero points and post-ops, default and
# extreme data), a CP run, the --report=table format (the table on stdout,
# the key=value lines in the log it names) and bad input (exit status 2,
# message on stderr).
# The dump + independent recomputation is in tests/test_driver.cpp.
set(QCONV_DRIVER_TEST_DIR ${CMAKE_CURRENT_BINARY_DIR}/driver_tests)
file(MAKE_DIRECTORY ${QCONV_DRIVER_TEST_DIR})

# Shapes covering the conv parameters at small sizes: padding, stride, odd
# channel counts, groups, depthwise, dilation, 1x1, a 1-pixel image, `*N` names.
file(WRITE ${QCONV_DRIVER_TEST_DIR}/small.batch [=[
# qconv-driver test batch
mb2ic16ih10oc32oh10kh3ph1n"dense3x3"
g1mb1ic17ih9iw7oc5oh5ow4kh3kw3sh2sw2ph1pw1n"odd_strided"   # odd channels, stride 2
g4mb1ic32ih8oc64oh8kh3ph1n"grouped*2"
g32mb1ic32ih9oc32oh5kh3sh2ph1n"depthwise"
mb1ic8ih7oc8oh3kh3dh1ph0n"dilated"
mb1ic64ih5oc3oh5kh1ph0n"pointwise*3"
mb1ic3ih1oc4oh1kh3ph1n"one_pixel"
]=])

# expect.cmake: runs the command after `--`, checks the exit status
# (EXPECT_RC) and optional regular expressions on stdout (EXPECT_OUT,
# FORBID_OUT) and stderr (EXPECT_ERR); with EXPECT_FILE, that file must be
# written by the command (it is removed first) and match EXPECT_FILE_MATCH.
file(WRITE ${QCONV_DRIVER_TEST_DIR}/expect.cmake [=[
set(cmd)
set(seen_dashes OFF)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(seen_dashes)
    list(APPEND cmd "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(seen_dashes ON)
  endif()
endforeach()
if(DEFINED EXPECT_FILE)
  file(REMOVE "${EXPECT_FILE}")
endif()
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("command: ${cmd}\nexit status: ${rc}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "expected exit status ${EXPECT_RC}, got ${rc}")
endif()
if(DEFINED EXPECT_OUT AND NOT out MATCHES "${EXPECT_OUT}")
  message(FATAL_ERROR "stdout does not match '${EXPECT_OUT}'")
endif()
if(DEFINED FORBID_OUT AND out MATCHES "${FORBID_OUT}")
  message(FATAL_ERROR "stdout matches '${FORBID_OUT}'")
endif()
if(DEFINED EXPECT_ERR AND NOT err MATCHES "${EXPECT_ERR}")
  message(FATAL_ERROR "stderr does not match '${EXPECT_ERR}'")
endif()
if(DEFINED EXPECT_FILE)
  if(NOT EXISTS "${EXPECT_FILE}")
    message(FATAL_ERROR "${EXPECT_FILE} was not written")
  endif()
  file(READ "${EXPECT_FILE}" content)
  if(NOT content MATCHES "${EXPECT_FILE_MATCH}")
    message(FATAL_ERROR "${EXPECT_FILE} does not match '${EXPECT_FILE_MATCH}'")
  endif()
endif()
]=])

# qconv_driver_test(NAME RC [OUT regex] [FORBID regex] [ERR regex] [FILE path FILE_MATCH regex]
#                   ARGS driver args...)
function(qconv_driver_test name rc)
  cmake_parse_arguments(T "" "OUT;FORBID;ERR;FILE;FILE_MATCH" "ARGS" ${ARGN})
  set(defs -DEXPECT_RC=${rc})
  if(DEFINED T_OUT)
    list(APPEND defs "-DEXPECT_OUT=${T_OUT}")
  endif()
  if(DEFINED T_FORBID)
    list(APPEND defs "-DFORBID_OUT=${T_FORBID}")
  endif()
  if(DEFINED T_ERR)
    list(APPEND defs "-DEXPECT_ERR=${T_ERR}")
  endif()
  if(DEFINED T_FILE)
    list(APPEND defs "-DEXPECT_FILE=${T_FILE}" "-DEXPECT_FILE_MATCH=${T_FILE_MATCH}")
  endif()
  add_test(NAME driver_${name}
    COMMAND ${CMAKE_COMMAND} ${defs} -P ${QCONV_DRIVER_TEST_DIR}/expect.cmake -- $<TARGET_FILE:qconv-driver> ${T_ARGS})
  set_tests_properties(driver_${name} PROPERTIES TIMEOUT 300 LABELS driver)
endfunction()

set(batch --batch=${QCONV_DRIVER_TEST_DIR}/small.batch)
set(no_failure "status=(mismatch|failed)")

qconv_driver_test(list 0 OUT "op=conv impl=ref:conv" ARGS conv --impl=list)
qconv_driver_test(batch_u8_channel_zp_fq 0 OUT "impl=ref:conv .*status=ok" FORBID ${no_failure}
  ARGS conv ${batch} --mode=C --impl=all --dt=u8:s8:u8 --zp=channel:random --post-ops=fq:per_channel)
qconv_driver_test(batch_u8_tensor_zp_relu_extreme 0 OUT "status=ok" FORBID ${no_failure}
  ARGS conv ${batch} --mode=C --impl=all --dt=u8:s8:s8 --zp=tensor:255 --post-ops=relu --data=extreme)
qconv_driver_test(batch_s8_f32_binary 0 OUT "status=ok" FORBID ${no_failure}
  ARGS conv ${batch} --mode=C --impl=all --dt=s8:s8:f32 --zp=tensor:-3 --post-ops=add:per_oc)
qconv_driver_test(batch_s32_scale_shift 0 OUT "status=ok" FORBID ${no_failure}
  ARGS conv ${batch} --mode=C --impl=all --dt=u8:s8:s32 --post-ops=scale_shift --scales=tensor)
qconv_driver_test(batch_auto_cp 0 OUT "impl=auto total=1 problems=7 ok=7 .*ms=[0-9.]+ gops=" FORBID ${no_failure}
  ARGS conv ${batch} --mode=CP --impl=auto --reps=2 --budget-ms=1 --zp=channel:random --post-ops=fq:per_tensor)
# The table: header, one row per layer, the depthwise rows collapsed on the
# dense layers, totals, and the raw log named on the last line.
set(report_dir ${QCONV_DRIVER_TEST_DIR}/report)
qconv_driver_test(report_table 0
  OUT "layer +qconv row +ms +GOPS +%peak [|] oneDNN row +ms +ratio +exact.*dense3x3 .*odd_strided .*jit:conv_dw_x8s8:avx2: unimplemented on [12] of 2 problems [(]first reason: .*total [(]layers weighted by [*]N[)]: qconv [0-9.]+ ms.*raw log: ${report_dir}/conv.log "
  FORBID "op=conv impl="
  FILE ${report_dir}/conv.log FILE_MATCH "^op=conv impl=.* status=ok .*impl=jit:conv_dw_x8s8:avx2 total=1 problems=2 ok=0 mismatch=0 unimplemented=2"
  ARGS conv mb2ic16ih10oc32oh10kh3ph1n"dense3x3" g1mb1ic17ih9iw7oc5oh5ow4kh3kw3sh2sw2ph1pw1n"odd_strided"
       --mode=CP --impl=all --reps=2 --budget-ms=1 --report=table --report-dir=${report_dir})
qconv_driver_test(matmul_report_table 0
  OUT "layer +qconv row .*m1k96n37 .*m5k96n70 .*jit:matmul_wc_x8:avx2: unimplemented on 2 of 2 problems [(]first reason: takes u8/s8 weights.*total .*raw log: ${report_dir}/matmul.log "
  FORBID "op=matmul impl="
  FILE ${report_dir}/matmul.log FILE_MATCH "^op=matmul impl=.* status=ok "
  ARGS matmul m1k96n37 m5k96n70 --wei=s4 --group=32 --zp=per_group
       --mode=CP --impl=all --reps=2 --budget-ms=1 --report=table --report-dir=${report_dir})

qconv_driver_test(bad_option 2 ERR "unknown option --bogus" ARGS conv --bogus=1 mb1ic4ih4oc4oh4kh1ph0)
qconv_driver_test(bad_desc 2 ERR "ic" ARGS conv mb1ic0ih4oc4oh4kh1ph0)
qconv_driver_test(bad_dt 2 ERR "--dt" ARGS conv --dt=u8:u8 mb1ic4ih4oc4oh4kh1ph0)
qconv_driver_test(bad_impl 2 ERR "--impl: unknown implementation" ARGS conv --impl=nope mb1ic4ih4oc4oh4kh1ph0)
qconv_driver_test(bad_mode 2 ERR "--mode" ARGS conv --mode=X mb1ic4ih4oc4oh4kh1ph0)
qconv_driver_test(bad_post_op 2 ERR "post_ops" ARGS conv --post-ops=nosuchop mb1ic4ih4oc4oh4kh1ph0)
qconv_driver_test(bad_zp_for_s8 2 ERR "zp" ARGS conv --dt=s8:s8:u8 --zp=channel:random mb1ic4ih4oc4oh4kh1ph0)
qconv_driver_test(bad_isa 2 ERR "isa" ARGS conv --isa=avx9000 mb1ic4ih4oc4oh4kh1ph0)
qconv_driver_test(missing_batch 2 ERR "cannot open" ARGS conv --batch=${QCONV_DRIVER_TEST_DIR}/no_such_file)
qconv_driver_test(bad_report 2 ERR "--report: expected kv or table" ARGS conv --report=html mb1ic4ih4oc4oh4kh1ph0)
qconv_driver_test(no_problem 2 ERR "no problem" ARGS conv --mode=C)
qconv_driver_test(unknown_mode 2 ERR "unknown mode" ARGS deconv mb1ic4ih4oc4oh4kh1ph0)
# A directory given as the graph file is bad input naming the problem (exit 2).
qconv_driver_test(graph_directory_is_bad_input 2 ERR "is a directory" ARGS graph ${PROJECT_SOURCE_DIR}/examples)

# --help: the overview names every mode; each mode's help lists its own options
# with defaults and an example (exit 0); an unknown option is still exit 2.
qconv_driver_test(help 0 OUT "modes:.*conv .*matmul .*graph .*MODE --help.*--threads=N" ARGS --help)
qconv_driver_test(help_conv 0 OUT "usage: qconv-driver conv.*--zp=none.*default none.*--post-ops.*example:.*--peak-file" ARGS conv --help)
qconv_driver_test(help_matmul 0 OUT "usage: qconv-driver matmul.*--wei=u8.*default u8.*example:" ARGS matmul -h)
qconv_driver_test(help_graph 0 OUT "usage: qconv-driver graph.*tol=steps:8.*--input=NAME=FILE.npy.*--tol-steps=N.*example:" ARGS graph --help)
qconv_driver_test(graph_bad_option 2 ERR "unknown option --bogus" ARGS graph --bogus ${PROJECT_SOURCE_DIR}/examples/ffn_u4.qg)
# The peak file: the first table measures the peak and writes it, a second
# table of the same ISA level and thread count reads it (the same GOPS).
set(peak_file ${QCONV_DRIVER_TEST_DIR}/peak.txt)
file(REMOVE ${peak_file})
add_test(NAME driver_peak_file_shared
  COMMAND sh -c "rm -f '${peak_file}'; a=$('$<TARGET_FILE:qconv-driver>' conv mb1ic16ih6oc16oh6kh1ph0 --mode=P --reps=1 --budget-ms=1 --threads=1 --report=table --report-dir='${report_dir}' --peak-file='${peak_file}' | grep '^%peak') || exit 1; b=$('$<TARGET_FILE:qconv-driver>' conv mb1ic16ih6oc16oh6kh1ph0 --mode=P --reps=1 --budget-ms=1 --threads=1 --report=table --report-dir='${report_dir}' --peak-file='${peak_file}' | grep '^%peak') || exit 1; echo \"$a\"; echo \"$b\"; echo \"$a\" | grep -q 'measured now' && echo \"$b\" | grep -q 'as measured earlier in' && [ \"$(echo \"$a\" | sed 's/ GOPS.*//')\" = \"$(echo \"$b\" | sed 's/ GOPS.*//')\" ] && [ $(wc -l < '${peak_file}') -eq 1 ]")
set_tests_properties(driver_peak_file_shared PROPERTIES TIMEOUT 120 LABELS driver)
