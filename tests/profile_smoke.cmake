# Smoke runs of --profile, --amp-report and --metrics in the examples (tests/profile_smoke/
# run.cmake checks the trace, the tables and the metrics records).
if(MANTISSA_BUILD_EXAMPLES)
  set(_profile_run ${CMAKE_CURRENT_SOURCE_DIR}/profile_smoke/run.cmake)
  if(EXISTS /usr/share/datasets/fashion-mnist)
    # 512 images in batches of 16: 32 steps, logged at steps 20 and 32; one evaluation.
    add_test(NAME example.mnist.profile
      COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:mnist> -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/profile-mnist
              "-DARGS=--model;cnn;--limit;512;--batch-size;16;--epochs;1;--amp;fp16;--profile-steps;1" -DTRAIN_RECORDS=2
              -DEVAL_RECORDS=1 -DNESTING=ON "-DOPS=Cnn;conv1;conv2d_forward;conv2d_backward;matmul;cross_entropy;backward;LinearBackward;AdamW.step;GradScaler.update;DataLoader.next"
              -P ${_profile_run})
    # 256 images in batches of 64 (drop_last): 4 steps, logged at the last; one evaluation.
    add_test(NAME example.cifar.profile
      COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:cifar> -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/profile-cifar
              "-DARGS=--limit;256;--depth;8;--batch-size;64;--epochs;1;--amp;bf16" -DTRAIN_RECORDS=1
              -DEVAL_RECORDS=1 "-DOPS=conv2d_forward;batch_norm_stats;SGD.step"
              -P ${_profile_run})
    set_tests_properties(example.mnist.profile example.cifar.profile PROPERTIES TIMEOUT 300)
  endif()
  if(EXISTS /usr/share/games/fortunes)
    # 20 steps, logged every 10; evaluated at the end only.
    add_test(NAME example.transformer.profile
      COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:transformer> -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/profile-transformer
              "-DARGS=--steps;20;--layers;1;--d-model;32;--context;32;--batch-size;4;--eval-every;0;--eval-batches;1;--sample;0;--amp;fp16"
              -DTRAIN_RECORDS=2 -DEVAL_RECORDS=1 "-DOPS=GPT;attention_forward;attention_backward;layer_norm;AdamW.step"
              -P ${_profile_run})
    set_tests_properties(example.transformer.profile PROPERTIES TIMEOUT 300)
  endif()
endif()
